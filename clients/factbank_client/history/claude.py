"""Claude Code's transcripts: `~/.claude/projects/<dir>/<session id>.jsonl` (or under
`$CLAUDE_CONFIG_DIR`), one JSON object a line, as Claude Code 2.1.197 writes them.

What is read (seen in the real files the harness tests make):

* every line of a session carries `sessionId`, `timestamp`, `cwd` (the shell's, so it moves
  with `cd`) and `gitBranch`;
* `type: "assistant"` lines hold `message.content[]` items `{"type": "tool_use", "id",
  "name", "input"}`; the `type: "user"` line after holds `{"type": "tool_result",
  "tool_use_id", "is_error", "content"}`;
* `Edit`, `Write`, `MultiEdit` (`input.file_path`) and `NotebookEdit` (`notebook_path`) touch
  a file when their result is not an error ("File has not been read yet" touched nothing);
* `Bash` (`input.command`): exit code 0 when the result is not an error (Claude Code reports a
  non-zero exit as a failed tool: the PostToolUseFailure hook), else the N of its
  `Exit code N` first line; an error without one (a refused or interrupted call) is skipped.

The event keys are the tool_use id (`toolu_...:0`), as the PostToolUse hook gives them.
"""

from __future__ import annotations

import os
import re

from factbank_client.history import Session, content_text, is_live, lines, parse_time

AGENT = "claude"
FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
              "NotebookEdit": "notebook_path"}
SHELL_TOOLS = {"Bash"}
EXIT = re.compile(r"^\s*(?:Error:\s*)?Exit code (-?\d+)")


def root_dir() -> str:
    """Claude Code's home (`$CLAUDE_CONFIG_DIR`, else ~/.claude)."""
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"),
                                                                ".claude")


def files(root: str | None = None) -> list[str]:
    """The session files under `<home>/projects/<dir>/`, oldest first."""
    root = os.path.join(root or root_dir(), "projects")
    out = []
    try:
        dirs = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for d in dirs:
        if not d.is_dir():
            continue
        try:
            out += [e.path for e in os.scandir(d.path) if e.name.endswith(".jsonl")
                    and e.is_file()]
        except OSError:
            continue
    return sorted(out, key=_mtime)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def exit_code(is_error: object, text: str) -> int | None:
    """0 for a Bash call that did not fail; N for `Exit code N`; None when unknown."""
    if not is_error:
        return 0
    m = EXIT.match(text or "")
    return int(m.group(1)) if m else None


def tool_events(session: Session, tool_id: str, name: str, tool_input: object,
                at: object, cwd: str | None, *, is_error: object = False,
                error_text: str = "") -> list[dict]:
    """The events of one finished tool call (the hook's and the transcript's, one rule)."""
    if not isinstance(tool_input, dict):
        return []
    if name in FILE_TOOLS:
        return session.edit_call(tool_id, at, tool_input.get(FILE_TOOLS[name]), name, is_error,
                                 cwd)
    if name in SHELL_TOOLS:
        return session.shell_call(tool_id, at, tool_input.get("command"), name,
                                  exit_code(is_error, error_text), is_error)
    return []


def read(path: str, *, live: bool | None = None) -> list[dict]:
    """The timeline events of one transcript file (every session in it)."""
    entries, _ = lines(path)
    live = is_live(path) if live is None else live
    sessions: dict[str, Session] = {}
    last: dict[str, object] = {}
    pending: dict[str, tuple[str, str, object]] = {}  # tool_use id -> (session, name, input)
    events: list[dict] = []
    for _, d in entries:
        sid = d.get("sessionId")
        at = parse_time(d.get("timestamp"))
        if not isinstance(sid, str) or not sid or at is None:
            continue
        cwd = d.get("cwd") if isinstance(d.get("cwd"), str) else None
        if sid not in sessions:
            if not cwd:
                continue
            sessions[sid] = Session(sid, AGENT, cwd,
                                    branch_name=d.get("gitBranch") or None)
            events.append(sessions[sid].start(at))
        last[sid] = at
        message = d.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for item in content:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "tool_use" and isinstance(item.get("id"), str):
                pending[item["id"]] = (sid, str(item.get("name") or ""), item.get("input"))
            elif item.get("type") == "tool_result" and item.get("tool_use_id") in pending:
                owner, name, tool_input = pending.pop(item["tool_use_id"])
                events += tool_events(sessions[owner], item["tool_use_id"], name, tool_input,
                                      at, cwd, is_error=item.get("is_error"),
                                      error_text=content_text(item.get("content")))
    if not live:
        events += [sessions[sid].end(at) for sid, at in last.items()]
    return events
