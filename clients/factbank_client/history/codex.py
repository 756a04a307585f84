"""Codex's rollout files: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl`
(or under `$CODEX_HOME`), one JSON object a line, as Codex 0.171.0 writes them.

What is read (seen in the real files the harness tests make):

* the first line, `type: "session_meta"`: `payload.id`, `timestamp`, `cwd`, and
  `git.repository_url` (the project when the directory is gone) / `git.branch`;
* `type: "event_msg"` lines with `payload.type: "item_completed"`; their `payload.item` is
  `{"type": "FileChange", "id": <call id>, "changes": {<absolute path>: {...}}, "status"}`
  for apply_patch (whether the model sent it as a tool or through `exec_command`) and
  `{"type": "CommandExecution", "id", "command": ["/bin/bash", "-lc", "<command>"],
  "exit_code", "status"}` for a shell command. A change that did not complete touched nothing.

Codex's hooks do not report these: apply_patch fires no PostToolUse, and a Bash PostToolUse
carries no exit code. So the Codex hooks read them here, from the rollout the hook payload
names (`transcript_path`), from where the session's last hook stopped: the edit is recorded
at the next hook that can (the next tool's PostToolUse, Stop at the end of the turn, or
SessionEnd). Keys are the call id and the path's index (`call_...:0`), the same for the hook
and `factbank import-history codex`.
"""

from __future__ import annotations

import os

from factbank_client.history import Session, is_live, lines, parse_time

AGENT = "codex"
SHELLS = {"-lc", "-c"}


def root_dir() -> str:
    """Codex's home (`$CODEX_HOME`, else ~/.codex)."""
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def files(root: str | None = None) -> list[str]:
    """The rollout files (live and archived), oldest first."""
    root = root or root_dir()
    out = []
    for sub in ("sessions", "archived_sessions"):
        for dirpath, _, names in os.walk(os.path.join(root, sub)):
            out += [os.path.join(dirpath, n) for n in names
                    if n.startswith("rollout-") and n.endswith(".jsonl")]
    return sorted(out, key=lambda p: (os.stat(p).st_mtime, p))


def command_text(command: object) -> str:
    if isinstance(command, list):
        parts = [str(c) for c in command]
        if len(parts) >= 3 and parts[-2] in SHELLS:
            return parts[-1]  # ["/bin/bash", "-lc", "<what the model asked for>"]
        return " ".join(parts)
    return command if isinstance(command, str) else ""


def item_events(session: Session, entry: dict) -> list[dict]:
    """The events of one rollout line ([] for anything but a finished edit or command)."""
    payload = entry.get("payload")
    if entry.get("type") != "event_msg" or not isinstance(payload, dict) \
            or payload.get("type") != "item_completed":
        return []
    item = payload.get("item")
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        return []
    at = parse_time(entry.get("timestamp"))
    if item.get("type") == "FileChange":
        changes = item.get("changes")
        if item.get("status") != "completed" or not isinstance(changes, dict):
            return []
        return [session.file(f"{item['id']}:{i}", at, path, "apply_patch")
                for i, path in enumerate(changes) if isinstance(path, str)][:50]
    if item.get("type") == "CommandExecution":
        command = command_text(item.get("command"))
        code = item.get("exit_code")
        if not command.strip() or item.get("status") not in ("completed", "failed"):
            return []
        return [session.command(f"{item['id']}:0", at, command, "exec_command",
                                code if isinstance(code, int) else None)]
    return []


def session_of(entry: dict) -> Session | None:
    payload = entry.get("payload")
    if entry.get("type") != "session_meta" or not isinstance(payload, dict):
        return None
    sid = payload.get("id") or payload.get("session_id")
    cwd = payload.get("cwd")
    if not isinstance(sid, str) or not isinstance(cwd, str):
        return None
    git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
    return Session(sid, AGENT, cwd, remote=git.get("repository_url") or None,
                   branch_name=git.get("branch") or None)


def read(path: str, *, live: bool | None = None) -> list[dict]:
    """The timeline events of one rollout file."""
    entries, _ = lines(path)
    live = is_live(path) if live is None else live
    session: Session | None = None
    events: list[dict] = []
    last = None
    for _, entry in entries:
        if session is None:
            session = session_of(entry)
            if session is not None:
                meta = entry.get("payload") or {}
                events.append(session.start(parse_time(meta.get("timestamp"))
                                            or parse_time(entry.get("timestamp"))))
            continue
        last = parse_time(entry.get("timestamp")) or last
        events += item_events(session, entry)
    if session is not None and not live and last is not None:
        events.append(session.end(last))
    return events
