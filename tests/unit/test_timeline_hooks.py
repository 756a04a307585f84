"""The recording hooks, run as the harnesses run them: a subprocess reading JSON on
stdin, against a stand-in service on loopback. The hook hands the event to a detached child
and returns at once: the child buffers it locally and sends it; a service that is down or
slow costs the hook nothing and loses nothing (within the bound); a conflict the service
answers is printed by the session's next hook (PostToolUse additional context, valid for
Codex's schema) or its next prompt hook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from factbank.runtime.runner import free_port
from factbank_client.hook import record as hookrecord
from tests.unit.hook_standins import HOOK, HookEnv, Service, parse, wait_for


class Env(HookEnv):
    """The hook's HOME and a repository on branch feature/x, both services at `port`."""

    def __init__(self, root: Path, port: int) -> None:
        url = f"http://127.0.0.1:{port}"
        super().__init__(root, url, {"personal": "tok-personal"}, ingest_url=url,
                         branch="feature/x")
        (self.repo / "src").mkdir()
        self.buffer = self.cache / "timeline-buffer.jsonl"

    def run(self, event: str, data: dict, claude: bool = True) -> tuple[int, str, float]:
        """(exit code, stdout, seconds) of one run, as Claude Code runs it unless `claude`
        is off; it never writes to stderr."""
        extra = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": data.get("session_id", "")}
        code, out, err, took = super().run(event, data, **(extra if claude else {}))
        assert err == ""
        return code, out, took

    def idle(self) -> bool:
        """No recording child holds the buffer's lock (it is taken for every send)."""
        import fcntl

        path = str(self.buffer) + ".lock"
        if not os.path.exists(path):
            return True
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def edit(self, path: str, sid: str = "sess-1", call: str = "toolu_1") -> dict:
        """A Claude Code 2.1.197 PostToolUse of Edit, as seen."""
        return {"session_id": sid, "transcript_path": None, "cwd": str(self.repo),
                "permission_mode": "default", "hook_event_name": "PostToolUse",
                "tool_name": "Edit", "tool_input": {"file_path": path, "old_string": "a",
                                                    "new_string": "b", "replace_all": False},
                "tool_response": {"filePath": path, "originalFile": "a\n"},
                "tool_use_id": call}

    def bash(self, command: str, sid: str = "sess-1", call: str = "toolu_2",
             failed: str | None = None) -> dict:
        """A Claude Code PostToolUse of Bash, or its PostToolUseFailure (`failed`)."""
        data = {"session_id": sid, "transcript_path": None, "cwd": str(self.repo / "src"),
                "permission_mode": "default", "tool_name": "Bash",
                "tool_input": {"command": command, "description": "run"},
                "tool_use_id": call}
        if failed is None:
            data.update(hook_event_name="PostToolUse",
                        tool_response={"stdout": "", "stderr": "", "interrupted": False})
        else:
            data.update(hook_event_name="PostToolUseFailure", error=failed,
                        is_interrupt=False)
        return data


@pytest.fixture
def service() -> Iterator[Service]:
    s = Service()
    yield s
    s.close()


def test_an_edit_is_recorded_relative_to_the_repo_root(tmp_path, service):
    env = Env(tmp_path, service.port)
    code, out, _ = env.run("post-tool-use", env.edit(str(env.repo / "src" / "app.py")))
    assert code == 0 and out == ""  # no conflict: nothing printed
    (event,) = wait_for(service.events)
    assert event["kind"] == "file" and event["path"] == "src/app.py"
    assert event["tool"] == "Edit" and event["agent"] == "claude"
    assert event["key"] == "toolu_1:0"  # what import-history gives the same tool call
    assert event["project"] == "github.com/acme/widgets" and event["session_id"] == "sess-1"
    assert event["at"].endswith("+00:00")
    assert service.requests[0]["token"] == "tok-personal"
    wait_for(env.idle)
    assert not env.buffer.exists()
    assert not Path(str(env.buffer) + ".sending").exists()


def test_a_command_is_recorded_with_its_exit_code(tmp_path, service):
    env = Env(tmp_path, service.port)
    env.run("post-tool-use", env.bash("ls", call="t1"))
    wait_for(service.events)
    env.run("post-tool-use-failure", env.bash("pytest -q", call="t2",
                                              failed="Exit code 1\nFAILED test_x"))
    first, second = wait_for(lambda: len(service.events()) == 2 and service.events())
    assert first["kind"] == "command" and first["command"] == "ls" and first["exit_code"] == 0
    assert second["command"] == "pytest -q" and second["exit_code"] == 1
    assert second["key"] == "t2:0"


def test_the_hook_does_not_wait_for_a_slow_service(tmp_path, service):
    service.delay = 3.0
    env = Env(tmp_path, service.port)
    code, out, took = env.run("post-tool-use", env.edit("src/slow.py"))
    assert code == 0 and out == "" and took < 2.0  # the answer comes 3 s later
    assert wait_for(service.events)[0]["path"] == "src/slow.py"


def test_a_conflict_is_told_at_the_sessions_next_hook(tmp_path, service):
    env = Env(tmp_path, service.port)
    warning = ("src/app.py was also touched by bob with codex on desk 3 min ago "
               "(a DIFFERENT branch: main)")
    service.conflicts = [{"session_id": "sess-1", "path": "src/app.py", "warning": warning}]
    code, out, _ = env.run("PostToolUse", env.edit("src/app.py"))
    assert code == 0 and out == ""  # the answer is not waited for
    pending = env.cache / "sessions" / "sess-1.pending"
    wait_for(pending.exists)
    # Another session's hook does not take it.
    assert env.run("post-tool-use", env.bash("ls", sid="sess-2"))[1] == ""
    _, out, _ = env.run("post-tool-use", env.bash("make", call="t3"))
    obj = parse("PostToolUse", out)
    assert obj["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert warning in obj["hookSpecificOutput"]["additionalContext"]
    assert env.run("post-tool-use", env.bash("make", call="t4"))[1] == ""  # once


def test_a_pending_conflict_goes_with_the_next_prompt(tmp_path, service):
    env = Env(tmp_path, service.port)
    warning = "src/app.py was also touched by bob with codex on desk 1 min ago (branch main)"
    service.conflicts = [{"session_id": "sess-1", "path": "src/app.py", "warning": warning}]
    env.run("post-tool-use", env.edit("src/app.py"))
    wait_for((env.cache / "sessions" / "sess-1.pending").exists)
    prompt = {"session_id": "sess-1", "transcript_path": None, "cwd": str(env.repo),
              "hook_event_name": "UserPromptSubmit", "prompt": "go on", "prompt_id": "p1",
              "permission_mode": "default"}
    _, out, _ = env.run("user-prompt-submit", prompt)
    obj = json.loads(out)
    assert obj["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    text = obj["hookSpecificOutput"]["additionalContext"]
    assert text == f"{hookrecord.CONFLICT_HEADER}\n- {warning}"
    assert env.run("user-prompt-submit", prompt)[1] == ""  # once


def test_service_down_buffers_and_a_later_event_sends_everything(tmp_path):
    port = free_port()
    env = Env(tmp_path, port)
    for i in range(3):
        code, out, took = env.run("post-tool-use", env.edit(f"src/m{i}.py", call=f"t{i}"))
        assert code == 0 and out == "" and took < 2
    sending = Path(str(env.buffer) + ".sending")
    wait_for(lambda: env.idle() and sending.exists()
             and len(sending.read_text().splitlines()) == 3)
    assert sending.stat().st_mode & 0o777 == 0o600
    wait_for(lambda: (env.cache / "hooks.log").read_text().count("kept for later") == 3)
    service = Service(port)
    try:
        env.run("post-tool-use", env.edit("src/m3.py", call="t3"))
        wait_for(lambda: len(service.events()) == 4)
        # The children may buffer in any order; each event carries when its hook ran.
        events = sorted(service.events(), key=lambda e: e["at"])
        assert [e["path"] for e in events] == [f"src/m{i}.py" for i in range(4)]
        wait_for(env.idle)
        assert not sending.exists()
    finally:
        service.close()


def test_the_buffer_is_bounded_and_says_what_it_dropped(tmp_path):
    env = Env(tmp_path, free_port())
    env.cache.mkdir(parents=True)
    line = json.dumps({"session_id": "old", "kind": "file", "path": "x.py"})
    sending = Path(str(env.buffer) + ".sending")
    sending.write_text((line + "\n") * 2100)
    env.run("post-tool-use", env.edit("src/new.py"))
    log = env.cache / "hooks.log"
    wait_for(lambda: log.exists() and "kept for later" in log.read_text() and env.idle())
    kept = sending.read_text().splitlines()
    assert len(kept) == hookrecord.MAX_BUFFER_LINES
    assert json.loads(kept[-1])["path"] == "src/new.py"  # the newest are kept
    assert "dropped the oldest 101" in log.read_text()


def test_session_start_is_recorded_before_the_block_is_asked_for(tmp_path, service):
    env = Env(tmp_path, service.port)
    data = {"session_id": "sess-9", "cwd": str(env.repo / "src"),
            "hook_event_name": "SessionStart", "source": "startup", "transcript_path": None}
    code, _, _ = env.run("session-start", data)
    assert code == 0
    assert [p["path"] for p in service.requests] == ["/v1/timeline/events", "/v1/inject"]
    (event,) = service.events()
    assert event["kind"] == "session_start" and event["branch"] == "feature/x"
    assert event["cwd"] == "src" and event["machine"] and event["key"] == "start"
    env.run("session-end", {**data, "hook_event_name": "SessionEnd", "reason": "other"})
    end = wait_for(lambda: len(service.events()) == 2 and service.events()[-1])
    assert end["kind"] == "session_end" and end["key"] == "end"


def test_other_tools_and_failed_edits_record_nothing(tmp_path, service):
    env = Env(tmp_path, service.port)
    read = {**env.edit("a.py"), "tool_name": "Read", "tool_input": {"file_path": "a.py"}}
    failed = {**env.edit("b.py"), "hook_event_name": "PostToolUseFailure",
              "error": "File has not been read yet"}
    refused = env.bash("rm -rf /", failed="The user doesn't want to proceed")
    for event, data in (("post-tool-use", read), ("post-tool-use-failure", failed),
                        ("post-tool-use-failure", refused)):
        code, out, _ = env.run(event, data)
        assert code == 0 and out == ""
    env.run("post-tool-use", env.edit("c.py", call="t9"))  # a marker after them
    events = wait_for(service.events)
    assert [e["path"] for e in events] == ["c.py"]


def codex_rollout(path: Path, repo: Path, items: list[dict]) -> None:
    """Lines in the shape Codex 0.171.0 writes (tests/harness/test_e2e_timeline.py reads the
    real ones): session_meta, then an item_completed event_msg per finished item."""
    lines = [{"timestamp": "2026-12-01T18:50:16.292Z", "ordinal": 0, "type": "session_meta",
              "payload": {"id": "cx-1", "timestamp": "2026-12-01T18:50:16.000Z",
                          "cwd": str(repo), "cli_version": "0.171.0"}}]
    for n, item in enumerate(items, 1):
        lines.append({"timestamp": f"2026-12-01T18:50:{17 + n}.000Z", "ordinal": n,
                      "type": "event_msg", "payload": {"type": "item_completed",
                                                       "thread_id": "cx-1", "item": item}})
    with path.open("a") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in lines[0 if not path.stat().st_size
                                                             else 1:]))


def test_codex_edits_are_read_from_its_rollout_at_the_next_hook(tmp_path, service):
    """apply_patch fires no PostToolUse in Codex: its edit is recorded from the rollout at
    the next hook (here the turn's Stop), the command with the exit code the Bash
    PostToolUse lacks; a second hook reads only what was added."""
    env = Env(tmp_path, service.port)
    rollout = env.home / ".codex" / "sessions" / "2026" / "12" / "01" / "rollout-x-cx-1.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text("")
    change = {"type": "FileChange", "id": "call_1", "status": "completed",
              "changes": {str(env.repo / "src" / "app.py"): {"type": "update"}}}
    command = {"type": "CommandExecution", "id": "call_2", "status": "failed",
               "command": ["/bin/bash", "-lc", "pytest -q"], "exit_code": 2}
    codex_rollout(rollout, env.repo, [change, command])
    stop = {"session_id": "cx-1", "turn_id": "t1", "transcript_path": str(rollout),
            "cwd": str(env.repo), "hook_event_name": "Stop", "model": "stub-model",
            "permission_mode": "bypassPermissions", "stop_hook_active": False,
            "last_assistant_message": "done"}
    code, out, _ = env.run("stop", stop, claude=False)
    assert code == 0 and out == ""
    first, second = wait_for(lambda: len(service.events()) == 2 and service.events())
    assert (first["kind"], first["path"], first["tool"], first["key"]) == (
        "file", "src/app.py", "apply_patch", "call_1:0")
    assert (second["command"], second["exit_code"], second["agent"]) == ("pytest -q", 2,
                                                                         "codex")
    codex_rollout(rollout, env.repo, [{**change, "id": "call_3"}])
    end = {"session_id": "cx-1", "transcript_path": str(rollout), "cwd": str(env.repo),
           "hook_event_name": "SessionEnd", "reason": "other"}
    env.run("session-end", end, claude=False)
    wait_for(lambda: len(service.events()) == 4)
    assert [(e["kind"], e.get("key")) for e in service.events()[2:]] == [
        ("file", "call_3:0"), ("session_end", "end")]


def test_a_patch_names_its_files():
    patch = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n"
             "*** Add File: docs/new.md\n+x\n*** End Patch\n")
    assert hookrecord.patch_paths({"input": patch}) == ["src/app.py", "docs/new.md"]
    assert hookrecord.patch_paths(patch) == ["src/app.py", "docs/new.md"]
    assert hookrecord.patch_paths({"other": 1}) == []


def test_the_recording_entry_imports_nothing(tmp_path):
    """The hook process itself (not its child) loads no module beyond the interpreter's own
    start-up, `os` (frozen in the interpreter), its entry module and `pending` (what it prints,
    both from bytecode): not json, not the rest of the package (`-X importtime` lists every
    import)."""
    env = Env(tmp_path, free_port())
    proc = subprocess.run([sys.executable, "-X", "importtime", *HOOK[1:], "post-tool-use"],
                          input=json.dumps(env.edit("src/a.py")).encode(),
                          capture_output=True, cwd=env.repo, timeout=10,
                          env={"HOME": str(env.home), "PATH": "/usr/bin:/bin"})
    base = subprocess.run([sys.executable, "-X", "importtime", "-I", "-S", "-c", "pass"],
                          capture_output=True, timeout=10)

    def names(err: bytes) -> set[str]:
        return {ln.rsplit("|", 1)[-1].strip() for ln in err.decode().splitlines()
                if ln.startswith("import time:") and "|" in ln} - {"imported package"}

    extra = names(proc.stderr) - names(base.stderr)
    assert extra <= {"_signal", "os", "stat", "_stat", "_collections_abc", "posixpath",
                     "genericpath", "factbank_client", "factbank_client.hook",
                     "factbank_client.hook.entry", "factbank_client.hook.pending"}, extra


def test_recording_leaves_no_alarm_armed(tmp_path, monkeypatch):
    """`hookrecord.process` arms SIGALRM to bound a stuck child; run in-process (no fork, or a
    test) it must disarm it, or the process dies CHILD_DEADLINE seconds later (a whole pytest
    run once ended with 'Alarm clock', exit 142)."""
    import signal

    from factbank_client.hook import record as hookrecord

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no config: nothing sent
    signal.alarm(0)
    hookrecord.process("PostToolUse", b"{}")
    assert signal.alarm(0) == 0
