"""Pi's session files: `~/.pi/agent/sessions/<dir>/<time>_<session id>.jsonl` (or under
`$PI_CODING_AGENT_DIR`), one JSON object a line, as Pi 0.73.1 writes them.

What is read (seen in the real files the harness tests make):

* the first line, `{"type": "session", "id", "timestamp", "cwd"}`;
* `type: "message"` lines: `message.role: "assistant"` with `content[]` items
  `{"type": "toolCall", "id", "name", "arguments"}`, then `message.role: "toolResult"` with
  `toolCallId`, `toolName`, `isError` and `content[]` text;
* `edit` and `write` (`arguments.path`, relative to the session's cwd) touch a file unless the
  result is an error; `bash` (`arguments.command`): exit code 0 when not an error, else the N
  of its `Command exited with code N`; an error without one is skipped.

Keys are the tool call id (`call_...:0`), as the Pi extension's `tool_result` events give them.
"""

from __future__ import annotations

import os
import re

from factbank_client.history import Session, content_text, is_live, lines, parse_time

AGENT = "pi"
FILE_TOOLS = {"edit", "write"}
SHELL_TOOLS = {"bash"}
EXIT = re.compile(r"Command exited with code (-?\d+)\s*$")


def root_dir() -> str:
    """Pi's agent directory (`$PI_CODING_AGENT_DIR`, else ~/.pi/agent)."""
    return os.environ.get("PI_CODING_AGENT_DIR") or os.path.join(os.path.expanduser("~"),
                                                                    ".pi", "agent")


def files(root: str | None = None) -> list[str]:
    """The session files, oldest first."""
    out = []
    for dirpath, _, names in os.walk(os.path.join(root or root_dir(), "sessions")):
        out += [os.path.join(dirpath, n) for n in names if n.endswith(".jsonl")]
    return sorted(out, key=lambda p: (os.stat(p).st_mtime, p))


def tool_events(session: Session, call_id: str, name: str, args: object, at: object,
                is_error: object, text: str) -> list[dict]:
    if not isinstance(args, dict):
        return []
    if name in FILE_TOOLS:
        return session.edit_call(call_id, at, args.get("path"), name, is_error)
    if name in SHELL_TOOLS:
        m = EXIT.search(text or "")
        code = (int(m.group(1)) if m else None) if is_error else 0
        return session.shell_call(call_id, at, args.get("command"), name, code, is_error)
    return []


def read(path: str, *, live: bool | None = None) -> list[dict]:
    """The timeline events of one session file."""
    entries, _ = lines(path)
    live = is_live(path) if live is None else live
    session: Session | None = None
    calls: dict[str, tuple[str, object]] = {}
    events: list[dict] = []
    last = None
    for _, d in entries:
        at = parse_time(d.get("timestamp"))
        if session is None:
            if d.get("type") == "session" and isinstance(d.get("id"), str) \
                    and isinstance(d.get("cwd"), str):
                session = Session(d["id"], AGENT, d["cwd"])
                events.append(session.start(at))
            continue
        last = at or last
        message = d.get("message")
        if d.get("type") != "message" or not isinstance(message, dict):
            continue
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for item in message["content"]:
                if isinstance(item, dict) and item.get("type") == "toolCall" \
                        and isinstance(item.get("id"), str):
                    calls[item["id"]] = (str(item.get("name") or ""), item.get("arguments"))
        elif message.get("role") == "toolResult" and message.get("toolCallId") in calls:
            name, args = calls.pop(message["toolCallId"])
            events += tool_events(session, message["toolCallId"], name, args, at,
                                  message.get("isError"), content_text(message.get("content")))
    if session is not None and not live and last is not None:
        events.append(session.end(last))
    return events
