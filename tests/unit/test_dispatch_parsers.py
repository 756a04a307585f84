"""The dispatch parsers on the streams the real harnesses printed (tests/fixtures/dispatch/,
captured by capture.py there from Claude Code 2.1.197, Codex 0.171.0 and Pi 0.73.1 against the
fake model server): each was scripted to run a command that succeeds, one that fails with
exit 2, to edit src/app.py and to answer with text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factbank_client.dispatch.parsers import parser_for, unwrap_shell
from factbank_client.dispatch.store import Run, RunStore, new_id

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dispatch"
CWD = "/tmp/CAPTURE/proj"  # capture.py's throwaway project directory


def parse(agent: str, lines: list[str] | None = None):
    parser = parser_for(agent, CWD)
    drafts = []
    for line in lines if lines is not None else (FIXTURES / f"{agent}.jsonl").read_text(
            ).splitlines():
        drafts += parser.feed(json.loads(line))
    return parser, drafts


@pytest.mark.parametrize("agent", ["claude", "codex", "pi"])
def test_commands_with_exit_codes_an_edit_and_the_answer(agent):
    parser, drafts = parse(agent)
    commands = [(d["command"], d["exit_code"], d["text"]) for d in drafts
                if d["kind"] == "command"]
    assert commands == [
        ("echo built > out.txt && cat out.txt", 0, "built"),
        ("ls missing-file", 2, "ls: cannot access 'missing-file': No such file or directory"),
    ]
    edits = [d for d in drafts if d["kind"] == "edit"]
    assert [d["path"] for d in edits] == ["src/app.py"]
    messages = [d["text"] for d in drafts if d["kind"] == "message"]
    assert messages == ["Done: built and edited src/app.py."]
    assert parser.summary == "Done: built and edited src/app.py."
    assert parser.files == ["src/app.py"]
    assert (parser.commands, parser.failed_commands) == (2, 1)
    assert parser.session_id and len(parser.session_id) >= 30
    assert parser.harness_error is None
    # The order is the stream's: both commands, then the edit, then the answer.
    kinds = [d["kind"] for d in drafts if d["kind"] in ("command", "edit", "message")]
    assert kinds == ["command", "command", "edit", "message"]


def test_claude_reports_other_tools_and_its_result():
    _, drafts = parse("claude")
    assert {"kind": "tool", "text": 'Read {"file_path": "src/app.py"}'} in drafts
    assert drafts[0]["kind"] == "status" and "Claude Code 2.1.197" in drafts[0]["text"]
    assert drafts[-1]["kind"] == "status" and drafts[-1]["text"].startswith(
        "result: success after 5 turns")


def test_claude_error_result_and_permission_denials_are_errors():
    lines = [json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True,
                         "result": "", "num_turns": 3, "session_id": "s1",
                         "permission_denials": [{"tool_name": "Bash",
                                                 "tool_input": {"command": "rm -rf x"}}]})]
    parser, drafts = parse("claude", lines)
    assert parser.session_id == "s1"
    assert parser.harness_error == "error_max_turns"
    errors = [d["text"] for d in drafts if d["kind"] == "error"]
    assert errors == ['permission denied: Bash {"command": "rm -rf x"}', "error_max_turns"]


def test_a_failed_edit_touches_nothing():
    use = {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "t1", "name": "Edit",
         "input": {"file_path": f"{CWD}/src/app.py", "old_string": "x", "new_string": "y"}}]}}
    result = {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
         "content": "String to replace not found in file."}]}}
    parser, drafts = parse("claude", [json.dumps(use), json.dumps(result)])
    assert parser.files == []
    assert [d["kind"] for d in drafts] == ["error"]
    assert "String to replace not found" in drafts[0]["text"]


def test_codex_unwraps_its_shell_and_reports_a_failed_turn():
    assert unwrap_shell("/bin/bash -lc 'echo built > out.txt && cat out.txt'") == \
        "echo built > out.txt && cat out.txt"
    assert unwrap_shell("/bin/bash -lc 'echo '\\''quoted'\\'''") == "echo 'quoted'"
    assert unwrap_shell("pytest -q") == "pytest -q"
    parser, drafts = parse("codex", [json.dumps({"type": "turn.failed",
                                                 "error": {"message": "stream disconnected"}})])
    assert parser.harness_error == "stream disconnected"
    assert drafts == [{"kind": "error", "text": "stream disconnected"}]


def test_secrets_in_output_and_commands_are_redacted(tmp_path):
    """Parsers keep the text; the store redacts every string it writes (store.py), so the
    parsed event is checked as the run's log holds it."""
    token = "fb_" + "A1b2C3d4" * 5
    github = "ghp_" + "Zk3Lq9Wx7Tn2" * 3
    item = {"type": "item.completed", "item": {
        "id": "i", "type": "command_execution", "exit_code": 0, "status": "completed",
        "command": f"/bin/bash -lc 'curl -H \"Authorization: Bearer {token}\" x'",
        "aggregated_output": f"FACTBANK_TOKEN={token}\nGITHUB_TOKEN={github}\n"}}
    _, drafts = parse("codex", [json.dumps(item)])
    store = RunStore(tmp_path / "runs")
    run = store.create(Run(id=new_id(), agent="codex", task="t", repo=str(tmp_path)))
    store.append_events(run.id, drafts)
    (cmd,) = [e.to_dict() for e in store.events(run.id)]
    assert token not in json.dumps(cmd) and github not in json.dumps(cmd)
    assert cmd["text"].count("[REDACTED:") == 2
    assert "Bearer [REDACTED:" in cmd["command"]


def test_pi_skips_the_repeated_partial_messages():
    lines = (FIXTURES / "pi.jsonl").read_text().splitlines()
    updates = [ln for ln in lines if json.loads(ln)["type"] == "message_update"]
    assert updates  # the stream does repeat the partial message on every delta
    _, drafts = parse("pi", updates)
    assert drafts == []


def test_a_line_that_is_not_json_is_kept_as_a_message():
    parser = parser_for("codex", CWD)
    assert parser.text_line("plain text output\n") == [
        {"kind": "message", "text": "plain text output"}]
    assert parser.text_line("   \n") == []


def test_claude_shows_the_context_a_session_start_hook_added():
    """claude-hooks.jsonl: a SessionStart hook answering as factbank's does."""
    parser, drafts = parse("claude", (FIXTURES / "claude-hooks.jsonl").read_text().splitlines())
    assert drafts[0] == {"kind": "status", "text": (
        "SessionStart hook added 78 chars of context: [factbank] Facts for this session "
        "(personal bank): #1 (trust 0.90) We use pnpm")}
    assert parser.summary == "Hello."
    failed = {"type": "system", "subtype": "hook_response", "hook_event": "Stop",
              "outcome": "error", "exit_code": 2, "stderr": "boom", "output": ""}
    _, drafts = parse("claude", [json.dumps(failed)])
    assert drafts == [{"kind": "error", "text": "Stop hook error (exit 2): boom"}]
    block = ("[factbank] Remembered facts: context, not truth. (bank: root)\n"
             "- #1 (trust 0.90) We use pnpm\n- #7 (trust 0.75) CI runs on build-box")
    ok = {"type": "system", "subtype": "hook_response", "hook_event": "SessionStart",
          "outcome": "success", "output": json.dumps({"hookSpecificOutput": {
              "hookEventName": "SessionStart", "additionalContext": block}})}
    _, drafts = parse("claude", [json.dumps(ok)])
    assert drafts[0]["text"] == (f"SessionStart hook added 2 facts ({len(block)} chars of "
                                 "context), first: - #1 (trust 0.90) We use pnpm")
