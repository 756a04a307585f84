"""The transcript readers behind `factbank import-history` (and the Codex hooks), on lines in
the shapes the real harnesses write (Claude Code 2.1.197, Codex 0.171.0, Pi 0.73.1; the real
files are read in tests/harness/test_e2e_timeline.py). What must hold: sessions, edits and
commands with exit codes, keys equal to the hooks', failed edits and refused commands left
out, a running session not ended, and no conversation text in any event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factbank_client.cli.history import since_time
from factbank_client.history import claude, codex, module, pi
from factbank_common.commands import CommandError
from tests.unit.history_lines import ANSWER, OUTPUT, PROMPT, claude_lines, write


def repo(tmp_path: Path, remote: str = "git@github.com:Acme/Api.git") -> Path:
    r = tmp_path / "api"
    (r / ".git").mkdir(parents=True)
    (r / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {remote}\n')
    (r / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (r / "src").mkdir()
    return r


def no_conversation(events: list[dict]) -> None:
    text = json.dumps(events)
    for secret in (PROMPT, OUTPUT, ANSWER):
        assert secret.split()[0] not in text


# --- Claude Code ---------------------------------------------------------------------------


def test_claude_sessions_edits_and_commands(tmp_path):
    r = repo(tmp_path)
    path = write(tmp_path / "home" / ".claude" / "projects" / "-api" / "cc-1.jsonl",
                 claude_lines(r))
    assert claude.files(str(tmp_path / "home" / ".claude")) == [str(path)]
    events = claude.read(str(path))
    got = [(e["kind"], e.get("key"), e.get("path") or e.get("command"), e.get("exit_code"))
           for e in events]
    assert got == [
        ("session_start", "start", None, None),
        ("file", "toolu_3:0", "src/app.py", None),  # the failed first Edit touched nothing
        ("command", "toolu_4:0", "cd src && pytest -q", 1),
        ("command", "toolu_5:0", "ls", 0),  # the refused rm: no exit code, not recorded
        ("file", "toolu_7:0", "docs/notes.md", None),  # relative to the shell's cwd
        ("session_end", "end", None, None),
    ]
    start = events[0]
    assert start["project"] == "github.com/acme/api" and start["agent"] == "claude"
    assert start["branch"] == "feature/retry" and start["cwd"] == "" and start["machine"]
    assert start["at"] == "2026-12-01T10:00:00+00:00"
    assert events[1]["at"] == "2026-12-01T10:00:03.500000+00:00"  # when the tool finished
    assert events[-1]["at"] == "2026-12-01T10:00:08+00:00"
    no_conversation(events)


def test_a_running_session_is_not_ended(tmp_path):
    r = repo(tmp_path)
    path = write(tmp_path / "p" / "cc-1.jsonl", claude_lines(r), old=False)
    assert [e["kind"] for e in claude.read(str(path))][-1] == "file"


def test_a_line_being_written_is_left_for_later(tmp_path):
    r = repo(tmp_path)
    path = write(tmp_path / "p" / "cc-1.jsonl", claude_lines(r))
    with path.open("a") as fh:
        fh.write('{"sessionId": "cc-1", "type": "user"')  # no newline yet
    assert len(claude.read(str(path), live=False)) == 6


# --- Codex ---------------------------------------------------------------------------------


def codex_lines(r: Path, cwd: Path | None = None) -> list[dict]:
    def item(n: int, it: dict) -> dict:
        return {"timestamp": f"2026-12-01T11:00:{n:02d}.000Z", "ordinal": n,
                "type": "event_msg", "payload": {"type": "item_completed", "item": it}}

    return [
        {"timestamp": "2026-12-01T11:00:00.100Z", "ordinal": 0, "type": "session_meta",
         "payload": {"id": "cx-1", "timestamp": "2026-12-01T11:00:00.000Z",
                     "cwd": str(cwd or r), "cli_version": "0.171.0", "base_instructions":
                     {"text": "You are a coding agent"},
                     "git": {"repository_url": "https://github.com/acme/api.git"}}},
        {"timestamp": "2026-12-01T11:00:01.000Z", "ordinal": 1, "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": PROMPT}]}},
        item(2, {"type": "UserMessage", "id": "u1", "content": [{"type": "text",
                                                                 "text": PROMPT}]}),
        item(3, {"type": "FileChange", "id": "call_1", "status": "completed",
                 "changes": {str(r / "src" / "app.py"): {"type": "update"},
                             str(r / "src" / "new.py"): {"type": "add"}},
                 "stdout": OUTPUT}),
        item(4, {"type": "FileChange", "id": "call_2", "status": "failed",
                 "changes": {str(r / "src" / "x.py"): {"type": "update"}}}),
        item(5, {"type": "CommandExecution", "id": "call_3", "status": "failed",
                 "command": ["/bin/bash", "-lc", "pytest -q; exit 3"], "exit_code": 3,
                 "aggregated_output": OUTPUT, "cwd": f"file://{r}"}),
        item(6, {"type": "AgentMessage", "id": "m1", "content": [{"type": "Text",
                                                                  "text": ANSWER}]}),
        {"timestamp": "2026-12-01T11:00:07.000Z", "ordinal": 7, "type": "event_msg",
         "payload": {"type": "task_complete", "last_agent_message": ANSWER}},
    ]


def test_codex_rollout(tmp_path):
    r = repo(tmp_path)
    path = write(tmp_path / ".codex" / "sessions" / "2026" / "12" / "01"
                 / "rollout-2026-12-01T11-00-00-cx-1.jsonl", codex_lines(r))
    assert codex.files(str(tmp_path / ".codex")) == [str(path)]
    events = codex.read(str(path))
    got = [(e["kind"], e.get("key"), e.get("path") or e.get("command"), e.get("exit_code"))
           for e in events]
    assert got == [
        ("session_start", "start", None, None),
        ("file", "call_1:0", "src/app.py", None),
        ("file", "call_1:1", "src/new.py", None),
        ("command", "call_3:0", "pytest -q; exit 3", 3),
        ("session_end", "end", None, None),
    ]
    assert {e["agent"] for e in events} == {"codex"}
    assert events[0]["project"] == "github.com/acme/api" and events[0]["branch"] == "main"
    assert events[0]["at"] == "2026-12-01T11:00:00+00:00"
    assert events[-1]["at"] == "2026-12-01T11:00:07+00:00"
    no_conversation(events)


def test_codex_session_whose_directory_is_gone_keeps_its_project(tmp_path):
    r = repo(tmp_path)
    path = write(tmp_path / "rollout-x.jsonl", codex_lines(r, cwd=tmp_path / "gone"))
    events = codex.read(str(path))
    assert events[0]["project"] == "github.com/acme/api"  # from the recorded remote


# --- Pi ------------------------------------------------------------------------------------


def pi_lines(r: Path) -> list[dict]:
    def call(n: int, name: str, args: dict) -> dict:
        return {"type": "message", "id": f"a{n}", "timestamp": f"2026-12-01T12:00:{n:02d}Z",
                "message": {"role": "assistant", "content": [
                    {"type": "toolCall", "id": f"call_{n}", "name": name, "arguments": args}]}}

    def result(n: int, name: str, text: str, error: bool = False) -> dict:
        return {"type": "message", "id": f"r{n}", "timestamp": f"2026-12-01T12:00:{n:02d}.5Z",
                "message": {"role": "toolResult", "toolCallId": f"call_{n}",
                            "toolName": name, "isError": error,
                            "content": [{"type": "text", "text": text}]}}

    return [
        {"type": "session", "version": 3, "id": "pi-1", "timestamp": "2026-12-01T12:00:00Z",
         "cwd": str(r)},
        {"type": "model_change", "id": "m", "timestamp": "2026-12-01T12:00:00.1Z"},
        {"type": "message", "id": "u", "timestamp": "2026-12-01T12:00:00.2Z",
         "message": {"role": "user", "content": [{"type": "text", "text": PROMPT}]}},
        call(1, "edit", {"path": "src/app.py", "oldText": "a", "newText": "b"}),
        result(1, "edit", "Successfully replaced 1 block(s) in src/app.py."),
        call(2, "bash", {"command": "make test"}),
        result(2, "bash", f"{OUTPUT}\n\n\nCommand exited with code 2", True),
        call(3, "write", {"path": "src/none.py", "content": ANSWER}),
        result(3, "write", "EACCES", True),
        call(4, "bash", {"command": "ls"}),
        result(4, "bash", OUTPUT),
        {"type": "message", "id": "z", "timestamp": "2026-12-01T12:00:09Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]}},
    ]


def test_pi_session(tmp_path):
    r = repo(tmp_path)
    path = write(tmp_path / "agent" / "sessions" / "--api--" / "2026_pi-1.jsonl", pi_lines(r))
    assert pi.files(str(tmp_path / "agent")) == [str(path)]
    events = pi.read(str(path))
    got = [(e["kind"], e.get("key"), e.get("path") or e.get("command"), e.get("exit_code"))
           for e in events]
    assert got == [
        ("session_start", "start", None, None),
        ("file", "call_1:0", "src/app.py", None),
        ("command", "call_2:0", "make test", 2),
        ("command", "call_4:0", "ls", 0),
        ("session_end", "end", None, None),
    ]
    assert {e["agent"] for e in events} == {"pi"}
    no_conversation(events)


def test_unknown_harness_and_since():
    with pytest.raises(ValueError, match="one of claude, codex, pi"):
        module("cursor")
    assert since_time("2026-11-01").isoformat() == "2026-11-01T00:00:00+00:00"
    assert (since_time(None) - since_time("30d")).total_seconds() < 5
    with pytest.raises(CommandError, match="--since"):
        since_time("last week")


def test_paths_through_a_symlink_are_relative_to_the_real_root(tmp_path):
    from factbank_client.history import Session

    r = repo(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(r)
    s = Session("s", "claude", str(link / "src"))
    assert s.root == str(r.resolve())
    assert s.file("k", None, str(link / "src" / "app.py"), "Edit")["path"] == "src/app.py"
    assert s.start(None)["cwd"] == "src"
