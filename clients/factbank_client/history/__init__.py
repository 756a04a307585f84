"""Timeline events read from a harness's own record of its sessions.

One module per transcript format, each written from what the real harness writes (seen in
the harness tests, `tests/harness/test_e2e_timeline.py`, never guessed):

* `claude`: Claude Code 2.1's project JSONL files, `~/.claude/projects/<dir>/<session>.jsonl`;
* `codex`: Codex 0.171's rollout files, `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`;
* `pi`: Pi 0.73's session files, `~/.pi/agent/sessions/<dir>/<time>_<session>.jsonl`.

Each gives, per session: its start (agent, machine, branch, cwd relative to the repo root) and
end, the files its edit tools touched (a failed edit touched nothing) and the commands it ran
with their exit codes, as `POST /v1/timeline/events` takes them. Never conversation text: a
prompt, an answer, a tool's output are read past, not kept. Every event carries a `key` (the
tool call's id and the event's index in it; `start`, `end`), the same key the hooks give the
same tool call, so the server stores each event once however often it is imported or recorded.

Standard library only: the Codex hook reads its rollout with `codex` to record the edits
Codex's hooks do not report (apply_patch fires no PostToolUse). The host name comes from
`_socket`, not `socket` (the same function): the session-start hook records the session
through this module, and `socket` brings `enum` and `selectors` (10 ms of CPU in a fresh
`python -I -S`, median of 21 on the 2-core box).
"""

from __future__ import annotations

import os
from _socket import gethostname  # `socket`'s own (module docstring: why not `socket`)
from datetime import UTC, datetime

HARNESSES = ("claude", "codex", "pi")
# A transcript written to this recently may belong to a running session: its end is left to
# the session's own SessionEnd hook (or a later import).
LIVE_SECONDS = 300


def module(harness: str):
    """The reader of one harness's format (`claude`, `codex`, `pi`)."""
    from importlib import import_module

    if harness not in HARNESSES:
        raise ValueError(f"unknown harness {harness!r}: one of {', '.join(HARNESSES)}")
    return import_module(f"factbank_client.history.{harness}")


def parse_time(text: object) -> datetime | None:
    """An ISO 8601 time as the harnesses write it (`2026-12-01T18:48:18.439Z`), or epoch
    milliseconds; None when it is neither."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return datetime.fromtimestamp(text / 1000, UTC)
    if not isinstance(text, str) or not text:
        return None
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def repo_root(cwd: str) -> str | None:
    from factbank_client.project import root_dir

    try:
        return root_dir(cwd)
    except OSError:
        return None


def relative(path: str, root: str | None, cwd: str) -> str:
    """`path` (absolute, or relative to `cwd`) relative to the repo root; as given outside it."""
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    if root:
        # The root is a real path (project.repo_root resolves it); the harness's may go
        # through a symlink (macOS /tmp -> /private/tmp).
        for candidate in (full, os.path.realpath(full)):
            rel = os.path.relpath(candidate, root)
            if not rel.startswith(".."):
                return rel.replace(os.sep, "/")
    return path


def branch(root: str | None) -> str:
    """The checked-out branch, read from HEAD (no git subprocess); "" when detached."""
    if not root:
        return ""
    git = os.path.join(root, ".git")
    try:
        if os.path.isfile(git):  # a worktree: "gitdir: <path>"
            with open(git, encoding="utf-8") as fh:
                target = fh.read().strip().removeprefix("gitdir:").strip()
            git = os.path.normpath(os.path.join(root, target))
        with open(os.path.join(git, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
    except OSError:
        return ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else ""


class Session:
    """One session's context: where it ran and what it is called on the timeline."""

    def __init__(self, session_id: str, agent: str, cwd: str, *, remote: str | None = None,
                 branch_name: str | None = None, machine: str | None = None) -> None:
        from factbank_client.project import normalise_remote, project_key

        self.session_id = session_id
        self.agent = agent
        self.cwd = cwd
        self.root = repo_root(cwd) if cwd else None
        try:
            project = project_key(cwd) if cwd and os.path.isdir(cwd) else None
        except OSError:
            project = None
        # The directory is gone: the remote the harness recorded still names the project.
        self.project = project or (normalise_remote(remote) if remote else None)
        self.branch = branch_name if branch_name is not None else branch(self.root)
        self.machine = machine if machine is not None else gethostname()[:200]

    def event(self, kind: str, key: str | None, at: datetime | None,
              **fields: object) -> dict:
        """One event as `POST /v1/timeline/events` takes it (`key` None: never deduplicated,
        for a payload without a tool call id)."""
        out: dict = {"session_id": self.session_id, "kind": kind, "project": self.project,
                     "agent": self.agent}
        if key is not None:
            out["key"] = key
        if at is not None:
            out["at"] = iso(at)
        out.update({k: v for k, v in fields.items() if v is not None})
        return out

    def start(self, at: datetime | None) -> dict:
        cwd = relative(self.cwd, self.root, self.cwd) if self.root else ""
        return self.event("session_start", "start", at, machine=self.machine,
                          branch=self.branch, cwd="" if cwd == "." else cwd)

    def end(self, at: datetime | None) -> dict:
        return self.event("session_end", "end", at)

    def file(self, key: str | None, at: datetime | None, path: str, tool: str,
             cwd: str | None = None) -> dict:
        return self.event("file", key, at, path=relative(path, self.root, cwd or self.cwd),
                          tool=tool)

    def command(self, key: str | None, at: datetime | None, command: str, tool: str,
                exit_code: int | None) -> dict:
        return self.event("command", key, at, command=command[:MAX_COMMAND_CHARS], tool=tool,
                          exit_code=exit_code)

    # One finished tool call of a harness that names its calls (Claude Code, Pi): why here,
    # both harnesses and the hook must keep a call or drop it by the same rule.
    def edit_call(self, call_id: str, at: datetime | None, path: object, tool: str,
                  failed: object, cwd: str | None = None) -> list[dict]:
        """A file edit that did not fail and names its file; [] otherwise."""
        if failed or not isinstance(path, str) or not path:
            return []
        return [self.file(f"{call_id}:0", at, path, tool, cwd)]

    def shell_call(self, call_id: str, at: datetime | None, command: object, tool: str,
                   exit_code: int | None, failed: object) -> list[dict]:
        """A command that is not blank, unless it failed with no exit code to show; []
        otherwise."""
        if not isinstance(command, str) or not command.strip() or (failed and exit_code is None):
            return []
        return [self.command(f"{call_id}:0", at, command, tool, exit_code)]


MAX_COMMAND_CHARS = 4000


def lines(path: str, start: int = 0) -> tuple[list[tuple[int, dict]], int]:
    """The JSON objects of the complete lines of `path` from byte `start`, with each line's
    offset, and the offset after the last complete line (a line still being written is left
    for the next read). Lines that are not JSON objects are skipped."""
    import json

    out: list[tuple[int, dict]] = []
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    offset = start
    for raw in data[:end].split(b"\n"):
        here = offset
        offset += len(raw) + 1
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append((here, obj))
    return out, start + end


def content_text(content: object) -> str:
    """A tool result's content (a string, or a list of blocks with "text") as text. Why here:
    Claude Code and Pi write results in this same form, and an exit code is read from it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def is_live(path: str, now: float | None = None) -> bool:
    import time

    try:
        return (now or time.time()) - os.stat(path).st_mtime < LIVE_SECONDS
    except OSError:
        return False
