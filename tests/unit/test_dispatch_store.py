"""The dispatch store and supervisor with real processes: a detached supervisor
(`python -m factbank_client.dispatch.supervisor`) runs a stand-in harness that replays a
stream the real Claude Code printed (tests/fixtures/dispatch/replay.py), and the tests read
the run the way the dashboard and `factbank dispatch` do, from the files on disk.

Covered: a run's record and log; a harness's exit code; a second store on the same directory
(a restarted dashboard) following a run that is still going; a supervisor killed with SIGKILL
marked lost (and the harness it left behind stopped); cancel; the bounds (events, text, list,
prune); start's refusals naming the argument."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from factbank_client.dispatch import DispatchError, Run, RunStore, handoff_text, start
from factbank_client.dispatch import store as store_mod
from factbank_client.dispatch.store import process_alive
from factbank_client.dispatch.supervisor import Log
from tests.conftest import wait_until as wait_for

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dispatch"


@pytest.fixture
def harness(tmp_path: Path) -> str:
    """An executable standing in for `claude`."""
    script = tmp_path / "fake-claude"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {FIXTURES / 'replay.py'} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


@pytest.fixture(autouse=True)
def no_login(monkeypatch, tmp_path: Path) -> None:
    """No client config: the supervisor must say the run is not on the timeline, not fail."""
    monkeypatch.setenv("FACTBANK_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("FACTBANK_TOKEN", raising=False)
    monkeypatch.delenv("FACTBANK_TEAM_TOKEN", raising=False)


def launch(store: RunStore, harness: str, repo: Path, **env: str) -> Run:
    full = {"PATH": os.environ["PATH"], "REPLAY_FILE": str(FIXTURES / "claude.jsonl"), **env}
    return start(store, "claude", "Build and greet.", repo, env=full,
                 binaries={"claude": harness})


def finished(store: RunStore, run_id: str) -> Run:
    return wait_for(f"run {run_id} to end", lambda: (r := store.get(run_id)) and r.finished
                    and r)


def test_a_run_is_recorded_with_its_log(tmp_path, harness, repo):
    store = RunStore(tmp_path / "runs")
    run = launch(store, harness, repo)
    assert run.status == "running" and run.agent == "claude" and run.repo == str(repo)
    assert run.supervisor_pid and run.id in [r.id for r in store.list()]
    done = finished(store, run.id)
    assert done.status == "done" and done.exit_code == 0
    assert done.session_id == "25fba946-2f28-489a-8e1b-8c88e326319a"
    assert done.summary == "Done: built and edited src/app.py."
    assert (done.commands, done.failed_commands) == (2, 1)
    # The timeline's answer is written after the end (a slow service never holds a finished
    # run "running").
    assert wait_for("the timeline note", lambda: store.get(run.id).timeline) == \
        "not recorded: not logged in (factbank login)"
    events = store.events(run.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert done.events == len(events)
    assert events[0].kind == "status" and events[0].text.startswith("started claude (pid")
    assert events[-1].kind == "status" and events[-1].text == \
        "done: claude exited with code 0"
    commands = [(e.command, e.exit_code) for e in events if e.kind == "command"]
    assert commands == [("echo built > out.txt && cat out.txt", 0), ("ls missing-file", 2)]
    assert any(e.kind == "stderr" and e.text == "replay: starting" for e in events)
    assert [e.seq for e in store.events(run.id, after=3)] == [e.seq for e in events[3:]]
    # Files are private; the record is plain JSON.
    d = store.run_dir(run.id)
    assert oct((d / "run.json").stat().st_mode & 0o777) == "0o600"
    assert oct(d.stat().st_mode & 0o777) == "0o700"
    assert json.loads((d / "run.json").read_text())["status"] == "done"


def test_the_exit_code_is_the_harness_s(tmp_path, harness, repo):
    store = RunStore(tmp_path / "runs")
    run = launch(store, harness, repo, REPLAY_EXIT="3")
    done = finished(store, run.id)
    assert (done.status, done.exit_code) == ("failed", 3)
    assert store.events(run.id)[-1].text == "failed: claude exited with code 3"


def test_a_restarted_reader_follows_a_run_still_going(tmp_path, harness, repo):
    store = RunStore(tmp_path / "runs")
    run = launch(store, harness, repo, REPLAY_DELAY="0.3")
    wait_for("the first events", lambda: len(store.events(run.id)) >= 3)
    # The dashboard that started it is gone; a new one reads the same directory.
    again = RunStore(tmp_path / "runs")
    seen = again.get(run.id)
    assert seen is not None and seen.status == "running"
    first = len(again.events(run.id))
    assert finished(again, run.id).status == "done"
    assert len(again.events(run.id)) > first


def test_a_killed_supervisor_makes_the_run_lost_and_its_harness_is_stopped(
        tmp_path, harness, repo):
    store = RunStore(tmp_path / "runs")
    run = launch(store, harness, repo, REPLAY_SLEEP="60")
    running = wait_for("the harness's pid", lambda: (r := store.get(run.id)) and r.pid and r)
    wait_for("the stream", lambda: any(e.kind == "message" for e in store.events(run.id)))
    os.kill(running.supervisor_pid, signal.SIGKILL)
    wait_for("the supervisor to die", lambda: not process_alive(running.supervisor_pid))
    lost = store.list()[0]
    assert lost.id == run.id and lost.status == "lost" and lost.ended_at
    assert "the supervisor" in lost.error and f"pid {running.pid}" in lost.error
    last = store.events(run.id)[-1]
    assert last.kind == "status" and last.text.startswith("lost: the supervisor")
    wait_for("the orphaned harness to stop", lambda: not process_alive(running.pid, run.id))
    assert store.get(run.id).status == "lost"  # stays lost; read again, nothing changes
    assert len(store.events(run.id)) == last.seq


def test_cancel_stops_the_harness_group(tmp_path, harness, repo):
    store = RunStore(tmp_path / "runs")
    run = launch(store, harness, repo, REPLAY_SLEEP="60")
    running = wait_for("the harness's pid", lambda: (r := store.get(run.id)) and r.pid and r)
    assert store.cancel(run.id) is True
    done = finished(store, run.id)
    assert done.status == "cancelled" and done.exit_code == -signal.SIGTERM
    assert store.events(run.id)[-1].text == "cancelled: claude was stopped by signal 15"
    assert not process_alive(running.pid, run.id)
    assert store.cancel(run.id) is False  # already over


def test_a_record_without_a_supervisor_yet_is_starting_not_lost(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create(Run(id=store_mod.new_id(), agent="pi", task="t", repo="/",
                           started_at=store_mod.now_iso()))
    assert store.get(run.id).status == "running"
    old = store.create(Run(id=store_mod.new_id(), agent="pi", task="t", repo="/",
                           started_at="2020-01-01T00:00:00+00:00"))
    assert store.get(old.id).status == "lost"
    # A pid that is alive but is not this run's supervisor (reused): lost too.
    other = store.create(Run(id=store_mod.new_id(), agent="pi", task="t", repo="/",
                             started_at=store_mod.now_iso(), supervisor_pid=os.getpid()))
    assert store.get(other.id).status == "lost"


def test_bounds_list_prune_text_and_log(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    ids = []
    for i in range(7):
        run = Run(id=store_mod.new_id(), agent="codex", task=f"t{i}", repo="/",
                  started_at=store_mod.now_iso(), status="done")
        store.create(run)
        ids.append(run.id)
        time.sleep(0.002)
    assert [r.id for r in store.list(limit=3)] == ids[::-1][:3]  # newest first, bounded
    assert store.prune(keep=5) == 2
    assert [r.id for r in store.list()] == ids[::-1][:5]
    # One event's text is cut; the log stops at its bound with one error, and the final
    # status is always written.
    seq = store.append_events(ids[-1], [{"kind": "message", "text": "x" * 10_000}])
    assert len(store.events(ids[-1])[0].text) == store_mod.MAX_TEXT
    monkeypatch.setattr(store_mod, "MAX_EVENTS", 5)
    log = Log(store, ids[-1])
    log.seq = seq
    log.add([{"kind": "message", "text": f"m{i}"} for i in range(10)])
    log.add([{"kind": "status", "text": "done"}], final=True)
    kinds = [(e.kind, e.text[:20]) for e in store.events(ids[-1])]
    assert kinds == [("message", "x" * 20), ("message", "m0"), ("message", "m1"),
                     ("error", "the log reached its "), ("status", "done")]
    assert log.dropped == 8


def test_start_refuses_with_the_argument_named(tmp_path, harness, repo):
    store = RunStore(tmp_path / "runs")
    with pytest.raises(DispatchError, match=r"^agent: unknown agent 'gpt'"):
        start(store, "gpt", "x", repo)
    with pytest.raises(DispatchError, match=r"^repo: .* is not a directory"):
        start(store, "claude", "x", tmp_path / "nope", binaries={"claude": harness})
    with pytest.raises(DispatchError, match=r"^task: a run needs a task"):
        start(store, "claude", "  ", repo, binaries={"claude": harness})
    with pytest.raises(DispatchError, match="is not an executable"):
        start(store, "pi", "x", repo, binaries={"pi": str(tmp_path / "no-pi")})
    assert store.list() == []  # nothing half-written


def test_handoff_text_is_bounded_and_says_what_the_run_did():
    run = Run(id="20261201T000000000-abcdef", agent="codex", task="fix the retry test",
              repo="/r", status="failed", exit_code=1, files=["src/retry.py"], commands=3,
              failed_commands=1, summary="Tests still fail: " + "x" * 3000,
              project="github.com/acme/api")
    text = handoff_text(run)
    assert len(text) <= 2000
    assert text.startswith("Codex ran headless (dispatch 20261201T000000000-abcdef, failed, "
                           "exit 1) on: fix the retry test")
    assert "Edited: src/retry.py." in text and "Ran 3 command(s), 1 failed." in text
    assert text.endswith("Full log: factbank dispatch show 20261201T000000000-abcdef")


def test_the_log_says_when_factbank_s_hooks_are_not_there(tmp_path):
    from factbank_client.dispatch.hooks_check import check

    home = tmp_path / "home"
    env = {"HOME": str(home)}
    assert check("claude", env, str(tmp_path), ["claude"])[0] == "not installed"
    assert check("pi", env, str(tmp_path), ["pi"])[0] == "not installed"
    assert check("codex", env, str(tmp_path), ["codex"])[0] == "not installed"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    hook = {"type": "command", "command": "/v/bin/python3 -I -S /v/factbank_client/hooks.py "
            "session-start"}
    settings.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [hook]}]}}))
    assert check("claude", env, str(tmp_path), ["claude"]) == (
        "active", "factbank's hooks are installed for Claude Code")
    ext = home / ".pi" / "agent" / "extensions" / "factbank.ts"
    ext.parent.mkdir(parents=True)
    ext.write_text("export default () => {}\n")
    assert check("pi", env, str(tmp_path), ["pi"])[0] == "active"
    codex_hooks = home / ".codex" / "hooks.json"
    codex_hooks.parent.mkdir(parents=True)
    codex_hooks.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [hook]}]}}))
    assert check("codex", env, str(tmp_path), ["codex", "exec",
                                               "--dangerously-bypass-hook-trust"])[0] == "active"


def test_a_run_past_its_timeout_is_stopped_and_failed(tmp_path, harness, repo):
    store = RunStore(tmp_path / "runs")
    full = {"PATH": os.environ["PATH"], "REPLAY_FILE": str(FIXTURES / "claude.jsonl"),
            "REPLAY_SLEEP": "60"}
    run = start(store, "claude", "Build and greet.", repo, env=full,
                binaries={"claude": harness}, timeout=2)
    done = finished(store, run.id)
    assert (done.status, done.exit_code, done.error) == ("failed", -signal.SIGTERM,
                                                         "timed out after 2 s")
    assert store.events(run.id)[-1].text == \
        "failed: timed out after 2 s; claude was stopped (exit code -15)"
    with pytest.raises(DispatchError, match=r"^timeout: 0 is not a positive number"):
        start(store, "claude", "x", repo, binaries={"claude": harness}, timeout=0)


def test_the_config_s_token_never_reaches_the_run_files(tmp_path, harness, repo, monkeypatch):
    """An agent that prints the environment: the supervisor scrubs the token its own
    environment names (FACTBANK_TOKEN) before anything is written."""
    token = "fb_" + "Zq9" * 12
    monkeypatch.setenv("FACTBANK_TOKEN", token)
    stream = tmp_path / "stream.jsonl"
    item = {"type": "item.completed", "item": {
        "id": "i", "type": "command_execution", "command": "env", "exit_code": 0,
        "status": "completed", "aggregated_output": f"HOME=/h\nFACTBANK_TOKEN={token}\n"}}
    stream.write_text(json.dumps({"type": "thread.started", "thread_id": "t1"}) + "\n"
                      + json.dumps(item) + "\n"
                      + json.dumps({"type": "item.completed", "item": {
                          "id": "m", "type": "agent_message",
                          "text": f"your token is {token}"}}) + "\n")
    store = RunStore(tmp_path / "runs")
    run = start(store, "codex", f"print {token}", repo, binaries={"codex": harness},
                env={"PATH": os.environ["PATH"], "REPLAY_FILE": str(stream)})
    done = finished(store, run.id)
    assert done.status == "done"
    files = list(store.run_dir(run.id).iterdir())
    assert {f.name for f in files} >= {"run.json", "events.jsonl"}
    for f in files:
        assert token not in f.read_text(), f.name
    (cmd,) = [e for e in store.events(run.id) if e.kind == "command"]
    assert "FACTBANK_TOKEN=[REDACTED:factbank_token]" in cmd.text
    assert done.task == "print [REDACTED:factbank_token]"


def test_polling_the_log_reads_what_is_new_and_never_half_a_line(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create(Run(id=store_mod.new_id(), agent="pi", task="t", repo="/",
                           started_at=store_mod.now_iso(), status="done"))
    store.append_events(run.id, [{"kind": "message", "text": f"m{i}"} for i in range(3)])
    assert [e.text for e in store.events(run.id)] == ["m0", "m1", "m2"]
    store.append_events(run.id, [{"kind": "message", "text": "m3"}])
    path = store.events_path(run.id)
    line = json.dumps({"seq": 5, "at": store_mod.now_iso(), "kind": "message", "text": "m4"})
    with path.open("a") as fh:  # the writer is half way through a line
        fh.write(line[:20])
    assert [e.text for e in store.events(run.id, after=3)] == ["m3"]
    with path.open("a") as fh:
        fh.write(line[20:] + "\n")
    assert [e.seq for e in store.events(run.id, after=4)] == [5]
    # A poll from further back (another viewer) reads from the start again, the same events.
    assert [e.text for e in store.events(run.id, after=1)] == ["m1", "m2", "m3", "m4"]
    assert [e.text for e in RunStore(tmp_path / "runs").events(run.id, after=2, limit=1)] \
        == ["m2"]  # seq 3
