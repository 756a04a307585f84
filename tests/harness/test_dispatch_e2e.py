"""Headless dispatch for real: the real harness binaries, started by the
dispatch supervisor, against the fake model server.

1. `factbank dispatch claude TASK` in a terminal (the CLI, a subprocess) on a machine with
   factbank installed and logged in to a real `factbank up`: the shared context loads at
   session start (the hooks are active), the live log shows a shell command with its exit code
   and a file edit, the exit code is Claude's, the run is on the timeline (start and end, with
   agent, task and outcome, in the harness's own session), and `factbank dispatch handoff`
   makes it a handoff that the next Codex session in the repository is given at its start.
2. Each harness through the library: the log shows the command's exit code and the edit.
3. A supervisor killed with SIGKILL mid-run: the run becomes `lost`, the harness is stopped.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from factbank_client.dispatch import RunStore, start
from factbank_client.dispatch.store import process_alive
from tests.conftest import wait_until

from .e2e import FAIL, Services, assert_ok, cli, cli_env, hook_log, install, login, repository
from .fake_model import FakeModel, Text, ToolCall
from .npm import Harnesses
from .runners import (
    claude_env,
    claude_settings_path,
    codex_env,
    configure_codex_home,
    configure_pi_home,
    pi_env,
    read_json,
    run_codex,
    write_json,
)

pytestmark = pytest.mark.harness

REMOTE = "git@github.com:acme/dispatch-e2e.git"
PROJECT = "github.com/acme/dispatch-e2e"
OK = "echo built > out.txt && cat out.txt"


def test_dispatch_from_the_terminal_logs_live_records_the_timeline_and_hands_off(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    services.require_inject()
    home = harness_home
    repo = repository(tmp_path / "repo", REMOTE)
    marker = "FBDISPATCH1"
    services.add(f"The dispatch-e2e repository is built with `just build-{marker}`.",
                 "project", PROJECT, ["build", "构建"])
    login(home, services)
    install(home, "claude")
    settings = claude_settings_path(home)  # the user's own allow list for shell commands
    conf = read_json(settings)
    conf.setdefault("permissions", {}).setdefault("allow", []).append("Bash")
    write_json(settings, conf)
    target = str(repo / "src" / "app.py")
    fake_model.script(ToolCall("Bash", {"command": OK, "description": "build"}),
                      ToolCall("Bash", {"command": FAIL, "description": "look"}),
                      ToolCall("Read", {"file_path": target}),
                      ToolCall("Edit", {"file_path": target, "old_string": "hello",
                                        "new_string": "hello from claude"}),
                      Text("Built it and greeted from src/app.py."))
    state = tmp_path / "state"
    env = cli_env(home, state, claude_env(home, fake_model, harnesses), harnesses.claude)
    task = "Build the project and greet from src/app.py."

    proc = cli(env, "dispatch", "claude", task, "--repo", str(repo))
    assert proc.returncode == 0, proc.stdout + proc.stderr + hook_log(home)
    log = proc.stdout
    assert f"$ {OK}  -> 0\n    built\n" in log
    assert f"$ {FAIL}  -> 2\n    ls: cannot access 'missing-file'" in log
    assert "✎ src/app.py (Edit)\n" in log
    assert "» Built it and greeted from src/app.py.\n" in log
    assert log.index(f"$ {OK}") < log.index("✎ src/app.py") < log.index("» Built it")
    assert "done, exit 0" in proc.stderr
    assert (repo / "src" / "app.py").read_text() == "print('hello from claude')\n"
    # The hooks were active: the shared context reached the model at session start, and the
    # live log shows it loading.
    assert fake_model.requests_containing(marker), hook_log(home)
    assert re.search(r"^# SessionStart hook added 1 fact \(\d+ chars of context\), first: "
                     r"- #\d+ \(trust 0\.90, project \[github\.com/acme/dispatch-e2e\]\) "
                     rf"The dispatch-e2e repository is built with `just build-{marker}`", log,
                     re.M), log

    store = RunStore(state / "factbank" / "runs")
    (run,) = store.list()
    assert (run.agent, run.status, run.exit_code, run.project) == ("claude", "done", 0,
                                                                   PROJECT)
    assert run.files == ["src/app.py"] and (run.commands, run.failed_commands) == (2, 1)
    listed = json.loads(cli(env, "dispatch", "list", "--json").stdout)["runs"]
    assert [r["id"] for r in listed] == [run.id]
    shown = json.loads(cli(env, "dispatch", "show", run.id, "--json").stdout)
    assert shown["run"]["status"] == "done"
    assert [e["exit_code"] for e in shown["events"] if e["kind"] == "command"] == [0, 2]

    # On the timeline, in Claude Code's own session: the start and the end with agent, task
    # and outcome, next to what the hooks recorded.
    events = wait_until("the run's end on the timeline", lambda: (
        evs := services.timeline(PROJECT)) and any(e.get("tool") == "dispatch"
                                           and e.get("exit_code") == 0 for e in evs) and evs)
    ours = [e for e in events if e.get("tool") == "dispatch"]
    assert sorted(e["command"] for e in ours) == [f"dispatch claude done: {task}",
                                                  f"dispatch claude: {task}"]
    assert {e["session"] for e in ours} == {run.session_id}
    assert {e["agent"] for e in ours} == {"claude"}
    assert any(e["kind"] == "file" and e["path"] == "src/app.py"
               and e["session"] == run.session_id for e in events)
    starts = [e for e in events if e["kind"] == "session_start"
              and e["session"] == run.session_id]
    assert len(starts) == 1  # the hook's and the dispatch's start are one event
    assert wait_until("the timeline note", lambda: store.get(run.id).timeline) == \
        "recorded in the personal bank"

    if os.environ.get("FACTBANK_DISPATCH_CAPTURE"):
        for args in (("dispatch", "list"), ("dispatch", "show", run.id)):
            cli(env, *args)
        cli(env, "timeline", cwd=repo)

    # One command makes it a handoff; the next Codex session in the repository gets it.
    proc = cli(env, "dispatch", "handoff", run.id, "--to", "codex")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("handoff #") and f"for codex in {PROJECT}: run {run.id}" \
        in proc.stdout
    assert store.get(run.id).handoff_id
    install(home, "codex")
    configure_codex_home(home, fake_model)
    before = len(fake_model.requests)
    result = run_codex(home, repo, "Where do I start?", fake_model, harnesses=harnesses)
    assert_ok(result, home)
    told = [r for r in fake_model.requests[before:] if r.api == "responses"
            and f"dispatch {run.id}" in r.dumps()]
    assert told, hook_log(home)
    text = told[0].dumps()
    capture = os.environ.get("FACTBANK_DISPATCH_CAPTURE")
    if capture:
        with open(capture, "a", encoding="utf-8") as fh:
            body = json.dumps(told[0].body, ensure_ascii=False)
            at = body.index("Handoff #")
            fh.write("Codex's next session start block:\n" + body[at - 200:at + 900] + "\n")
    assert "Claude Code ran headless" in text and "Edited: src/app.py." in text
    assert "root with claude on" in text and "with cli" not in text  # the run's session


def _claude(h: Harnesses, fake: FakeModel, home: Path, repo: Path) -> tuple[dict, list[str]]:
    write_json(claude_settings_path(home), {"permissions": {"allow": ["Bash"]}})
    fake.script(ToolCall("Bash", {"command": FAIL}),
                ToolCall("Write", {"file_path": str(repo / "notes.md"), "content": "hi\n"}),
                Text("done"))
    return claude_env(home, fake, h), []


def _codex(h: Harnesses, fake: FakeModel, home: Path, repo: Path) -> tuple[dict, list[str]]:
    configure_codex_home(home, fake)
    patch = "*** Begin Patch\n*** Add File: notes.md\n+hi\n*** End Patch\n"
    fake.script(ToolCall("exec_command", {"cmd": FAIL}),
                ToolCall("exec_command", {"cmd": f"apply_patch <<'EOF'\n{patch}EOF\n"}),
                Text("done"))
    return codex_env(home, fake, h), []


def _pi(h: Harnesses, fake: FakeModel, home: Path, repo: Path) -> tuple[dict, list[str]]:
    configure_pi_home(home, fake)
    fake.script(ToolCall("bash", {"command": FAIL}),
                ToolCall("write", {"path": "notes.md", "content": "hi\n"}), Text("done"))
    return pi_env(home, fake, h), ["--offline", "--provider", "stub", "--model", "stub-model"]


@pytest.mark.parametrize(("agent", "setup"), [("claude", _claude), ("codex", _codex),
                                              ("pi", _pi)])
def test_each_harness_logs_its_command_and_edit(
    agent: str, setup: Callable, harnesses: Harnesses, fake_model: FakeModel,
    harness_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FACTBANK_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("FACTBANK_TOKEN", raising=False)
    repo = repository(tmp_path / "repo", REMOTE)
    env, extra = setup(harnesses, fake_model, harness_home, repo)
    store = RunStore(tmp_path / "runs")
    run = start(store, agent, "Look around and leave a note.", repo, env=env,
                binaries={agent: str(getattr(harnesses, agent))}, extra_args=extra)
    done = wait_until("the run to end", lambda: (r := store.get(run.id)) and r.finished
                      and r, timeout=120)
    events = store.events(run.id)
    assert done.status == "done" and done.exit_code == 0, [e.to_dict() for e in events]
    assert [(e.command, e.exit_code) for e in events if e.kind == "command"] == [(FAIL, 2)]
    assert [e.path for e in events if e.kind == "edit"] == ["notes.md"]
    assert (repo / "notes.md").read_text() == "hi\n"
    assert done.session_id and done.summary == "done"
    assert wait_until("the timeline note", lambda: store.get(run.id).timeline) == \
        "not recorded: not logged in (factbank login)"


def test_a_killed_supervisor_leaves_a_lost_run_and_no_harness(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FACTBANK_CONFIG", str(tmp_path / "none.toml"))
    repo = repository(tmp_path / "repo", REMOTE)
    configure_pi_home(harness_home, fake_model)
    fake_model.script(ToolCall("bash", {"command": "sleep 60"}), Text("slept"))
    store = RunStore(tmp_path / "runs")
    run = start(store, "pi", "Wait a minute.", repo, env=pi_env(harness_home, fake_model,
                                                                harnesses),
                binaries={"pi": str(harnesses.pi)},
                extra_args=["--offline", "--provider", "stub", "--model", "stub-model"])
    running = wait_until("the sleep to start", lambda: fake_model.generation_requests("chat")
                         and (r := store.get(run.id)) and r.pid and r, timeout=120)
    os.kill(running.supervisor_pid, signal.SIGKILL)
    wait_until("the supervisor to die", lambda: not process_alive(running.supervisor_pid))
    lost = store.get(run.id)
    assert lost.status == "lost", lost
    assert store.events(run.id)[-1].text.startswith("lost: the supervisor")
    wait_until("Pi to be stopped", lambda: not process_alive(running.pid, run.id), timeout=15)
    assert [r.status for r in RunStore(tmp_path / "runs").list()] == ["lost"]
