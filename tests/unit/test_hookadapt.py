"""Gemini CLI, Qwen Code and Copilot CLI hook payloads (captured from the real binaries:
tests/fixtures/harness-payloads/*.jsonl) read in Claude Code's terms, and factbank's output
given back in theirs (factbank_client/hook/adapt.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from factbank_client.hook import adapt as hookadapt
from factbank_client.hook import main as hookmain
from factbank_client.hook.record import agent_name
from factbank_client.install import common

PAYLOADS = Path(__file__).resolve().parents[1] / "fixtures" / "harness-payloads"
EVENT = {"SessionStart": "SessionStart", "BeforeAgent": "UserPromptSubmit",
         "AfterAgent": "Stop", "AfterTool": "PostToolUse", "SessionEnd": "SessionEnd",
         "UserPromptSubmit": "UserPromptSubmit", "Stop": "Stop", "PostToolUse": "PostToolUse",
         "sessionStart": "SessionStart", "userPromptSubmitted": "UserPromptSubmit",
         "agentStop": "Stop", "postToolUse": "PostToolUse", "sessionEnd": "SessionEnd"}


def captured(harness: str) -> list[tuple[str, dict]]:
    lines = (PAYLOADS / f"{harness}.jsonl").read_text().splitlines()
    return [(d["event"], d["payload"]) for d in map(json.loads, lines) if d["event"] in EVENT]


def test_the_hook_entry_knows_the_same_harnesses() -> None:
    from factbank_client.hook import entry as hookentry

    assert hookentry.NEXT_HARNESSES == hookadapt.HARNESSES


@pytest.mark.parametrize("harness", ["gemini", "qwen", "copilot"])
def test_every_captured_payload_reads_as_claudes(harness: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # All three set CLAUDE_PROJECT_DIR: the agent must come from the hook's argument.
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", "/somewhere")
    seen = []
    for own, payload in captured(harness):
        event, data = hookadapt.normalize(harness, EVENT[own], payload)
        assert data["session_id"] and data["cwd"] and agent_name(data) == harness
        if event.startswith("PostToolUse"):
            seen.append((data["tool_name"], data["tool_input"], data["tool_use_id"]))
        if EVENT[own] == "Stop":
            assert data["stop_hook_active"] is False  # Qwen says true on an ordinary stop
        if EVENT[own] == "UserPromptSubmit":
            assert isinstance(data["prompt"], str)
    names = [s[0] for s in seen]
    assert "Write" in names and "Bash" in names, seen
    write = next(s for s in seen if s[0] == "Write")
    assert write[1]["file_path"].endswith("/notes.txt")
    assert len({s[2] for s in seen}) == len(seen), "two tool calls share an id"


@pytest.mark.parametrize(("harness", "name", "args", "result", "want"), [
    ("qwen", "run_shell_command", {"command": "make"}, {"llmContent": "Exit Code: 2"},
     ("PostToolUseFailure", "Exit code 2")),
    ("qwen", "run_shell_command", {"command": "ls"}, {"llmContent": "Exit Code: 0"},
     ("PostToolUse", None)),
    ("copilot", "bash", {"command": "false"},
     {"resultType": "failure", "textResultForLlm": "<shellId: 0 completed with exit code 1>"},
     ("PostToolUseFailure", "Exit code 1")),
    ("gemini", "run_shell_command", {"command": "ls"}, {"llmContent": "Output: a"},
     ("PostToolUse", None)),
    ("opencode", "bash", {"command": "pytest"}, "Exit code 5", ("PostToolUseFailure",
                                                                 "Exit code 5")),
])
def test_shell_exit_codes(harness: str, name: str, args: dict, result: object,
                          want: tuple) -> None:
    if harness == "copilot":
        payload = {"sessionId": "s", "cwd": "/r", "toolName": name, "toolArgs": args,
                   "toolResult": result}
    else:
        payload = {"session_id": "s", "cwd": "/r", "tool_name": name, "tool_input": args,
                   "tool_response": result}
    event, data = hookadapt.normalize(harness, "PostToolUse", payload)
    assert (event, data.get("error")) == want and data["tool_name"] == "Bash"


def test_gemini_prompt_without_the_session_block_it_prepended() -> None:
    prompt = ("<hook_context>[factbank] Remembered facts: ...\n- #1 build with just"
              "</hook_context>\n\nWhy does port 8443 fail?")
    _, data = hookadapt.normalize("gemini", "UserPromptSubmit",
                                  {"session_id": "s", "cwd": "/r", "prompt": prompt})
    assert data["prompt"] == "Why does port 8443 fail?"


def test_output_in_each_harness_terms() -> None:
    ctx = hookmain.context_output("UserPromptSubmit", "facts")
    assert hookadapt.render("gemini", "UserPromptSubmit", ctx) == {
        "hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "facts"}}
    assert hookadapt.render("qwen", "UserPromptSubmit", ctx) == ctx
    assert hookadapt.render("copilot", "UserPromptSubmit", ctx) == {"additionalContext": "facts"}
    stop = {"decision": "block", "reason": "save"}
    for h in ("gemini", "qwen", "copilot"):
        assert hookadapt.render(h, "Stop", stop) == stop
        assert hookadapt.render(h, "Stop", None) is None
    pending = json.dumps(hookmain.context_output("PostToolUse", "conflict")).encode()
    assert json.loads(hookadapt.render_pending("gemini", pending))["hookSpecificOutput"][
        "hookEventName"] == "AfterTool"
    assert json.loads(hookadapt.render_pending("copilot", pending)) == {
        "additionalContext": "conflict"}


def run_hook(home: Path, event: str, harness: str, payload: dict) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", "-S", common.hook_script(), event, harness],
                          input=json.dumps(payload).encode(), capture_output=True, timeout=20,
                          env={"PATH": os.environ.get("PATH", "/usr/bin"), "HOME": str(home)})
    return proc.returncode, proc.stdout.decode(), time.monotonic() - start


@pytest.mark.parametrize("harness", ["gemini", "qwen", "copilot"])
def test_service_down_every_captured_event_is_silent_and_fast(tmp_path: Path,
                                                              harness: str) -> None:
    home = tmp_path / "home"
    cfg = home / ".config" / "factbank" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('url = "http://127.0.0.1:1"\nrecall_url = "http://127.0.0.1:1"\n'
                   '[banks.personal]\ntoken = "t"\n')
    ours = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit",
            "Stop": "stop", "PostToolUse": "post-tool-use", "SessionEnd": "session-end"}
    for own, payload in captured(harness):
        rc, out, seconds = run_hook(home, ours[EVENT[own]], harness, payload)
        assert rc == 0 and out == "" and seconds < 2.0, (own, out, seconds)


def test_qwen_empty_prompt_after_a_tool_round_is_not_a_prompt(tmp_path: Path) -> None:
    """Qwen fires its prompt hook again with `prompt: ""` after each tool round: five such
    rounds must not count as five prompts (the reminder would come after one real one)."""
    home = tmp_path / "home"
    payload = {"session_id": "q1", "cwd": str(tmp_path), "prompt": ""}
    for _ in range(5):
        assert run_hook(home, "user-prompt-submit", "qwen", payload)[:2] == (0, "")
    stop = {"session_id": "q1", "cwd": str(tmp_path), "stop_hook_active": True}
    assert run_hook(home, "stop", "qwen", stop)[:2] == (0, "")
    for _ in range(5):
        run_hook(home, "user-prompt-submit", "qwen", {**payload, "prompt": "real"})
    rc, out, _ = run_hook(home, "stop", "qwen", stop)  # Qwen's `true` is ignored: reminds
    assert rc == 0 and json.loads(out)["decision"] == "block"


@pytest.mark.parametrize(("line", "save"), [
    # Copilot CLI's events.jsonl: the system prompt lists the tool; only a call is a save.
    ('{"type": "system.message", "data": {"content": "tools: factbank-add, factbank-search"}}',
     False),
    ('{"type": "tool.execution_start", "data": {"toolCallId": "c1", "toolName": '
     '"factbank-add", "arguments": {"content": "x"}}}', True),
    ('{"type": "tool.execution_start", "data": {"toolName": "factbank-search"}}', False),
    # Gemini CLI's chat file: a functionCall of mcp_factbank_add / _supersede.
    ('{"type": "gemini", "toolCalls": [{"name": "mcp_factbank_supersede", "args": {}}]}', True),
    ('{"type": "gemini", "toolCalls": [{"name": "mcp_factbank_search", "args": {}}]}', False),
    # Claude Code and Qwen Code (unchanged).
    ('{"type": "tool_use", "name": "mcp__factbank__add"}', True),
])
def test_a_save_in_each_harness_transcript(line: str, save: bool) -> None:
    assert any(p.search(line.encode()) for p in hookmain.save_patterns()) is save


def test_opencode_reminder_rides_on_the_next_prompt(tmp_path: Path) -> None:
    """OpenCode's plugin cannot block a stop: the due reminder is kept and the session's next
    prompt carries it, once."""
    home = tmp_path / "home"
    prompt = {"session_id": "o1", "cwd": str(tmp_path), "prompt": "work"}
    for _ in range(5):
        run_hook(home, "user-prompt-submit", "opencode", prompt)
    stop = {"session_id": "o1", "cwd": str(tmp_path), "stop_hook_active": False}
    assert run_hook(home, "stop", "opencode", stop)[:2] == (0, "")
    rc, out, _ = run_hook(home, "user-prompt-submit", "opencode", prompt)
    assert rc == 0
    assert "factbank reminder" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert run_hook(home, "user-prompt-submit", "opencode", prompt)[1] == ""
