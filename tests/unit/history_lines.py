"""Harness session files for the history tests (unit and integration): a Claude Code
session's lines with a prompt, a tool output and an answer that must never be imported."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

PROMPT = "PROMPT-TEXT please fix the retry logic"
OUTPUT = "TOOL-OUTPUT 3 passed"
ANSWER = "ANSWER-TEXT done, the retry works"


def write(path: Path, lines: list[dict], *, old: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    if old:  # not a running session
        stamp = time.time() - 3600
        os.utime(path, (stamp, stamp))
    return path


def claude_lines(r: Path, hour: str = "2026-12-01T10", sid: str = "cc-1") -> list[dict]:
    """A Claude Code session in the hour `hour` (`YYYY-MM-DDTHH`)."""
    base = {"sessionId": sid, "cwd": str(r), "gitBranch": "feature/retry",
            "version": "2.1.197", "isSidechain": False}

    def use(n: int, name: str, tool_input: dict) -> dict:
        return {**base, "type": "assistant", "timestamp": f"{hour}:00:{n:02d}.000Z",
                "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"toolu_{n}", "name": name,
                     "input": tool_input}]}}

    def result(n: int, content: str, error: bool = False, cwd: Path = r) -> dict:
        return {**base, "cwd": str(cwd), "type": "user",
                "timestamp": f"{hour}:00:{n:02d}.500Z",
                "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": content,
                     "is_error": error}]}}

    app = str(r / "src" / "app.py")
    return [
        {"type": "queue-operation", "operation": "enqueue", "content": PROMPT,
         "sessionId": sid, "timestamp": f"{hour}:00:00.000Z"},
        {**base, "type": "user", "timestamp": f"{hour}:00:00.000Z",
         "message": {"role": "user", "content": PROMPT}},
        use(1, "Edit", {"file_path": app, "old_string": "a", "new_string": "b"}),
        result(1, "<tool_use_error>File has not been read yet.</tool_use_error>", True),
        use(2, "Read", {"file_path": app}),
        result(2, OUTPUT),
        use(3, "Edit", {"file_path": app, "old_string": "a", "new_string": "b"}),
        result(3, "The file has been updated."),
        use(4, "Bash", {"command": "cd src && pytest -q", "description": "tests"}),
        result(4, f"Exit code 1\n{OUTPUT}", True, r / "src"),
        use(5, "Bash", {"command": "ls", "description": "list"}),
        result(5, OUTPUT, False, r / "src"),
        use(6, "Bash", {"command": "rm -rf /", "description": "no"}),
        result(6, "The user doesn't want to proceed with this tool use.", True),
        use(7, "Write", {"file_path": "../docs/notes.md", "content": ANSWER}),
        result(7, "File created successfully", False, r / "src"),
        {**base, "type": "assistant", "timestamp": f"{hour}:00:08.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]}},
    ]
