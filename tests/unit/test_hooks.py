"""The Claude Code / Codex hook process, run exactly as the harnesses run it (a subprocess
reading JSON on stdin), against a stand-in recall service on loopback.

Every output is validated against Codex's own output schemas (unknown keys rejected, Stop has
no hookSpecificOutput); Claude Code accepts the same shapes. The failure cases (service down,
a socket that accepts and never answers, garbage stdin, stdin never closed) must all exit 0
within about a second and print nothing.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from factbank.runtime.runner import free_port
from tests.unit.hook_standins import HOOK, HOOK_SCRIPT, HookEnv, StandIn, parse, validate


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A socket that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield sock.getsockname()[1]
    stop.set()
    t.join()
    for c in held:
        c.close()
    sock.close()


@pytest.fixture
def hook(tmp_path: Path, standin: StandIn) -> HookEnv:
    return HookEnv(tmp_path, standin.url, {"personal": "tok-personal"})


# --- injection --------------------------------------------------------------------------------


def test_session_start_injects_the_block(hook: HookEnv, standin: StandIn) -> None:
    standin.texts["tok-personal"] = "factbank: #7 (trust 0.90) the repo uses pnpm, never npm"
    payload = hook.session_start()
    validate("SessionStart", "input", payload)
    rc, out, err, _ = hook.run("session-start", payload)
    assert rc == 0, err
    obj = parse("SessionStart", out)
    assert obj == {"hookSpecificOutput": {
        "hookEventName": "SessionStart",
        "additionalContext": "factbank: #7 (trust 0.90) the repo uses pnpm, never npm"}}
    [req] = standin.requests
    assert req["path"] == "/v1/inject" and req["token"] == "tok-personal"
    assert req["body"] == {"kind": "session", "session_id": "sess-1",
                           "project": "github.com/acme/widgets", "prompt": None, "banks": 1}
    assert req["agent"] == "codex"


def test_prompt_injects_and_sends_the_prompt(hook: HookEnv, standin: StandIn) -> None:
    standin.texts["tok-personal"] = "用 pnpm 安装依赖 (fact #3)"
    payload = hook.prompt("怎么安装依赖?")
    validate("UserPromptSubmit", "input", payload)
    rc, out, _, _ = hook.run("UserPromptSubmit", payload, CLAUDECODE="1")
    assert rc == 0
    obj = parse("UserPromptSubmit", out)
    assert obj["hookSpecificOutput"]["additionalContext"] == "用 pnpm 安装依赖 (fact #3)"
    assert out.isascii(), "output is ASCII-escaped JSON, whatever the locale"
    [req] = standin.requests
    assert req["body"]["kind"] == "prompt" and req["body"]["prompt"] == "怎么安装依赖?"
    assert req["agent"] == "claude"


def test_nothing_to_inject_prints_nothing(hook: HookEnv, standin: StandIn) -> None:
    for event, payload in (("session-start", hook.session_start()),
                           ("user-prompt-submit", hook.prompt("hi"))):
        rc, out, err, _ = hook.run(event, payload)
        assert (rc, out, err) == (0, "", "")
    assert len(standin.requests) == 2


def test_two_banks_merge_personal_first(tmp_path: Path, standin: StandIn) -> None:
    env = HookEnv(tmp_path, standin.url, {"team": "tok-team", "personal": "tok-personal"})
    standin.texts.update({"tok-personal": "PERSONAL-BLOCK", "tok-team": "TEAM-BLOCK"})
    rc, out, _, _ = env.run("session-start", env.session_start())
    assert rc == 0
    text = parse("SessionStart", out)["hookSpecificOutput"]["additionalContext"]
    assert text == "PERSONAL-BLOCK\n\nTEAM-BLOCK"


def test_one_bank_failing_keeps_the_other(tmp_path: Path, standin: StandIn) -> None:
    env = HookEnv(tmp_path, standin.url, {"personal": "tok-personal", "team": "tok-team"})
    standin.texts["tok-team"] = "TEAM-ONLY"
    # the personal token gets "" (nothing qualifies); the team one answers
    rc, out, _, _ = env.run("session-start", env.session_start())
    assert parse("SessionStart", out)["hookSpecificOutput"]["additionalContext"] == "TEAM-ONLY"
    assert rc == 0


def test_no_config_prints_nothing(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    proc = subprocess.run([*HOOK, "session-start"], input=b'{"session_id": "x", "cwd": "/"}',
                          capture_output=True, env={"HOME": str(home), "PATH": "/usr/bin"},
                          timeout=10)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


# --- the service down or slow -------------------------------------------------------------------


@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit"])
def test_service_down_exits_fast_printing_nothing(tmp_path: Path, event: str) -> None:
    env = HookEnv(tmp_path, f"http://127.0.0.1:{free_port()}", {"personal": "t"})
    payload = env.session_start() if event == "session-start" else env.prompt("hello")
    rc, out, err, took = env.run(event, payload)
    assert (rc, out, err) == (0, "", "")
    assert took < 1.5
    assert "ConnectionRefused" in env.log.read_text()


@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit"])
def test_silent_service_gives_up_within_a_second(tmp_path: Path, silent_port: int,
                                                 event: str) -> None:
    env = HookEnv(tmp_path, f"http://127.0.0.1:{silent_port}",
                  {"personal": "t1", "team": "t2"})
    payload = env.session_start() if event == "session-start" else env.prompt("hello")
    rc, out, err, took = env.run(event, payload)
    assert (rc, out, err) == (0, "", "")
    assert took < 1.5, f"took {took:.2f}s"
    assert "gave up" in env.log.read_text() or "timed out" in env.log.read_text()


def test_slow_http_answer_is_dropped(hook: HookEnv, standin: StandIn) -> None:
    standin.texts["tok-personal"] = "too late"
    standin.delay = 3.0
    rc, out, err, took = hook.run("session-start", hook.session_start())
    assert (rc, out, err) == (0, "", "")
    assert took < 1.5


def test_stdin_never_closed_still_exits(hook: HookEnv) -> None:
    start = time.monotonic()
    proc = subprocess.Popen([*HOOK, "session-start"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=hook.repo,
                            env=hook.env())
    try:
        proc.wait(timeout=5)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    assert proc.returncode == 0
    assert proc.stdout is not None and proc.stdout.read() == b""
    assert time.monotonic() - start < 1.5


# --- garbage in ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stdin", [b"", b"not json", b"{\"session_id\": ", b"[1, 2]", b"null",
                                   b"\xff\xfe\x00garbage", b'{"session_id": 5}',
                                   b'{"prompt": ["x"], "session_id": "s"}'])
@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit", "stop"])
def test_garbage_stdin(hook: HookEnv, standin: StandIn, stdin: bytes, event: str) -> None:
    standin.texts["tok-personal"] = "SHOULD-NOT-MATTER"
    rc, out, err, _ = hook.run(event, stdin)
    assert rc == 0 and err == ""
    if out:  # '{"session_id": 5}' is a usable (if odd) payload: the output must still be valid
        parse({"session-start": "SessionStart", "user-prompt-submit": "UserPromptSubmit",
               "stop": "Stop"}[event], out)


@pytest.mark.parametrize("argv", [[], ["bogus"], ["pre-tool-use"], ["stop", "extra"]])
def test_bad_arguments(hook: HookEnv, argv: list[str]) -> None:
    proc = subprocess.run([*HOOK, *argv], input=json.dumps(hook.stop()).encode(),
                          capture_output=True, env=hook.env(), cwd=hook.repo, timeout=10)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


# --- the Stop reminder ----------------------------------------------------------------------------


def test_stop_reminds_once_after_five_prompts(hook: HookEnv) -> None:
    validate("Stop", "input", hook.stop())
    for n in range(1, 5):
        hook.run("user-prompt-submit", hook.prompt(f"prompt {n}"))
        rc, out, _, _ = hook.run("stop", hook.stop())
        assert (rc, out) == (0, ""), f"no reminder after {n} prompts"
    hook.run("user-prompt-submit", hook.prompt("prompt 5"))
    rc, out, _, _ = hook.run("stop", hook.stop())
    obj = parse("Stop", out)
    assert obj["decision"] == "block" and "factbank" in obj["reason"]
    assert "hookSpecificOutput" not in obj
    # The harness continues the turn and stops again with stop_hook_active: never block again.
    rc, out, _, _ = hook.run("stop", hook.stop(active=True))
    assert (rc, out) == (0, "")
    # ... nor at the next ordinary stop: the count restarted.
    hook.run("user-prompt-submit", hook.prompt("prompt 6"))
    assert hook.run("stop", hook.stop())[1] == ""


def test_stop_never_blocks_when_hook_driven(hook: HookEnv) -> None:
    for n in range(7):
        hook.run("user-prompt-submit", hook.prompt(f"p{n}"))
    for _ in range(3):
        assert hook.run("stop", hook.stop(active=True))[1] == ""
    assert parse("Stop", hook.run("stop", hook.stop())[1])["decision"] == "block"


def test_a_save_resets_the_count(hook: HookEnv) -> None:
    for n in range(4):
        hook.run("user-prompt-submit", hook.prompt(f"p{n}"))
    with hook.transcript.open("a") as fh:  # Claude Code's transcript line for an MCP tool call
        fh.write(json.dumps({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "mcp__factbank__add", "input": {}}]}}) + "\n")
    assert hook.run("stop", hook.stop())[1] == ""
    for n in range(4):
        hook.run("user-prompt-submit", hook.prompt(f"q{n}"))
        assert hook.run("stop", hook.stop())[1] == ""
    hook.run("user-prompt-submit", hook.prompt("q5"))
    assert parse("Stop", hook.run("stop", hook.stop())[1])["decision"] == "block"


def test_codex_transcript_save_is_seen(hook: HookEnv) -> None:
    for n in range(6):
        hook.run("user-prompt-submit", hook.prompt(f"p{n}"))
    with hook.transcript.open("a") as fh:  # Codex rollout line for an MCP function call
        fh.write(json.dumps({"type": "response_item", "payload": {
            "type": "function_call", "name": "add", "namespace": "mcp__factbank",
            "arguments": "{}"}}) + "\n")
    assert hook.run("stop", hook.stop())[1] == ""


def test_other_factbank_tools_are_not_saves(hook: HookEnv) -> None:
    for n in range(5):
        hook.run("user-prompt-submit", hook.prompt(f"p{n}"))
    with hook.transcript.open("a") as fh:
        for name in ("mcp__factbank__add_category", "mcp__factbank__search",
                     "mcp__other__add"):
            fh.write(json.dumps({"type": "tool_use", "name": name}) + "\n")
    assert parse("Stop", hook.run("stop", hook.stop())[1])["decision"] == "block"


def test_sessions_count_separately(hook: HookEnv) -> None:
    for n in range(5):
        hook.run("user-prompt-submit", hook.prompt(f"p{n}", sid="A"))
    assert hook.run("stop", hook.stop(sid="B"))[1] == ""
    assert parse("Stop", hook.run("stop", hook.stop(sid="A"))[1])["decision"] == "block"


def test_reminder_asks_for_bilingual_questions_and_stays_short() -> None:
    from factbank_client.hook import main as hookmain

    text = hookmain.REMINDER
    assert "2-4 questions" in text and "English and Chinese" in text and "tags" in text
    # Shown once and never answered by itself: short, and it tells the model how to stop.
    assert len(text) < 650 and "stop without answering" in text


def test_every_output_shape_validates() -> None:
    """The shapes the module can produce, checked directly against the schemas."""
    from factbank_client.hook import main as hookmain

    validate("SessionStart", "output", hookmain.context_output("SessionStart", "x"))
    validate("UserPromptSubmit", "output", hookmain.context_output("UserPromptSubmit", "x"))
    validate("Stop", "output", {"decision": "block", "reason": hookmain.REMINDER})
    assert hookmain.context_output("SessionStart", "") is None


def test_hook_imports_stay_light(tmp_path: Path) -> None:
    """No site, no httpx/mcp/urllib.request/ssl/server code in the hook process, even on the
    path that reads the config and computes the project key."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import runpy, sys\n"
        f"sys.argv = [{HOOK_SCRIPT!r}, 'user-prompt-submit']\n"
        "import os; os._exit = lambda code: None\n"  # let runpy return
        f"runpy.run_path({HOOK_SCRIPT!r}, run_name='__main__')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('httpx', 'mcp', 'urllib3', "
        "'factbank', 'litestar', 'asyncpg', 'site', 'hashlib') "
        "or m in ('urllib.request', 'http.client', 'ssl')]\n"
        "assert 'factbank_client.config' in sys.modules, sorted(sys.modules)\n"
        "sys.stderr.write(','.join(bad))\n")
    home = tmp_path / "h"
    cfg = home / ".config" / "factbank" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(f'recall_url = "http://127.0.0.1:{free_port()}"\n[banks.personal]\n'
                   'token = "t"\n')
    proc = subprocess.run([sys.executable, "-I", "-S", str(probe)], capture_output=True,
                          text=True, timeout=20, env={"HOME": str(home)},
                          input=json.dumps({"session_id": "s", "cwd": str(tmp_path),
                                            "prompt": "hello"}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""


def test_module_form_works_too(hook: HookEnv, standin: StandIn) -> None:
    standin.texts["tok-personal"] = "VIA -m"
    proc = subprocess.run([sys.executable, "-m", "factbank_client.hooks", "session-start"],
                          input=json.dumps(hook.session_start()).encode(), capture_output=True,
                          env=hook.env(), cwd=hook.repo, timeout=10)
    assert proc.returncode == 0
    assert parse("SessionStart", proc.stdout.decode())["hookSpecificOutput"][
        "additionalContext"] == "VIA -m"
