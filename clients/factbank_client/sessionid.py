"""Which harness session a write or a search belongs to, for miss counting (docs/misses.md).

The hooks get the session id in every payload; the MCP server and a `factbank` command that
an agent runs through its shell tool do not (no harness passes it in their environment). What
they share with the hooks is the harness process: the harness starts its hooks (directly or
through `sh -c`), its MCP servers and its shell commands. So the prompt and session-start
hooks leave a marker naming the session for the nearest ancestor that is not a shell (the
harness), and a client looks for a marker on its own ancestors. A marker holds the process's
start time too, so a recycled pid never inherits a session. `FACTBANK_SESSION_ID` overrides
it (a script), then `CLAUDE_CODE_SESSION_ID` (Claude Code exports its own).

Standard library only, and cheap: the prompt hook runs it at every prompt (one read of
/proc/<ppid>/stat and one small file written, ~0.1 ms).
"""

from __future__ import annotations

import os

from factbank_client.settings import settings

ENV = "FACTBANK_SESSION_ID"
HEADER = "X-Factbank-Session"
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "busybox", "env", "timeout",
                    "nice"})
MAX_DEPTH = 12


def _dir() -> str:
    from factbank_client.paths import cache_dir

    return os.path.join(cache_dir(), "harness-pids")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(command name, parent pid, start time in clock ticks) of a process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    head, _, rest = raw.rpartition(b")")
    fields = rest.split()
    try:
        name = head.split(b"(", 1)[1].decode("utf-8", "replace")
        return name, int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _harness_pid(start: int) -> tuple[int, int] | None:
    """The nearest ancestor from `start` (inclusive) that is not a shell or a launcher."""
    pid = start
    for _ in range(MAX_DEPTH):
        if pid <= 1:
            return None
        info = _stat(pid)
        if info is None:
            return None
        name, parent, started = info
        base = name.rsplit("/", 1)[-1]
        if base not in SHELLS:
            return pid, started
        pid = parent
    return None


def mark(session_id: str) -> None:
    """Called by a hook: the harness that runs it is in session `session_id`. Never raises."""
    try:
        found = _harness_pid(os.getppid())
        if found is None or not session_id:
            return
        pid, started = found
        path = os.path.join(_dir(), str(pid))
        try:
            with open(path, encoding="utf-8") as fh:
                if fh.read() == f"{started} {session_id}":
                    return  # already marked (every prompt after the first)
        except OSError:
            pass
        from factbank_client import safefs

        safefs.write(path, f"{started} {session_id}", private=True)
    except Exception:  # a marker is best effort, never a reason for a hook to fail
        pass


def current() -> str:
    """The session this process runs in: $FACTBANK_SESSION_ID, else the marker of the nearest
    ancestor that has one (and the same start time), else ""."""
    # Claude Code exports its session id to what it runs (hookentry.session_of reads it too).
    explicit = (settings.session_id or os.environ.get("CLAUDE_CODE_SESSION_ID") or "").strip()
    if explicit:
        return explicit[:200]
    try:
        base = _dir()
        pid = os.getppid()
        for _ in range(MAX_DEPTH):
            if pid <= 1:
                return ""
            info = _stat(pid)
            if info is None:
                return ""
            try:
                with open(os.path.join(base, str(pid)), encoding="utf-8") as fh:
                    started, _, session = fh.read().partition(" ")
                if started == str(info[2]) and session:
                    return session.strip()[:200]
            except OSError:
                pass
            pid = info[1]
    except Exception:
        return ""
    return ""
