"""`up` and `down`, the parts that need no Postgres: the handle list loses dead pids, the state
file names a process only while that very process runs (pid reuse), and `down` ends an `up`
that ignores SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from factbank.runtime import lifecycle


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_clean_handles_drops_only_dead_pids(tmp_path):
    dead = _dead_pid()
    (tmp_path / lifecycle.HANDLES).write_text(json.dumps([dead, os.getpid()]))
    assert lifecycle.clean_handles(tmp_path) == [dead]
    assert json.loads((tmp_path / lifecycle.HANDLES).read_text()) == [os.getpid()]
    assert lifecycle.clean_handles(tmp_path) == []


def test_a_state_file_names_a_process_only_while_it_runs(tmp_path):
    lifecycle.write_state(tmp_path, ports={"ingest": 1, "recall": 2})
    state = lifecycle.read_state(tmp_path)
    assert state["pid"] == os.getpid() and state["ports"] == {"ingest": 1, "recall": 2}
    assert lifecycle.running(tmp_path).up_alive
    # The same pid, another start time: a reused pid is not our `up`.
    state["started"] -= 100
    (tmp_path / lifecycle.STATE_FILE).write_text(json.dumps(state))
    assert not lifecycle.running(tmp_path).up_alive
    lifecycle.clear_state(tmp_path, pid=os.getpid() + 1)  # not its owner: kept
    assert lifecycle.read_state(tmp_path) is not None
    lifecycle.clear_state(tmp_path, pid=os.getpid())
    assert lifecycle.read_state(tmp_path) is None


def test_down_kills_an_up_that_ignores_sigterm(tmp_path):
    stubborn = subprocess.Popen([sys.executable, "-c",
                                 "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline().strip() == "ready"
    (tmp_path / lifecycle.STATE_FILE).write_text(json.dumps(
        {"pid": stubborn.pid, "started": lifecycle.create_time(stubborn.pid)}))
    start = time.monotonic()
    result = lifecycle.down(tmp_path, timeout=1)
    assert stubborn.wait(timeout=10) == -signal.SIGKILL
    assert result["stopped"] == [{"what": "factbank up", "pid": stubborn.pid}]
    assert result["running"] == [] and time.monotonic() - start < 10
    assert lifecycle.read_state(tmp_path) is None


@pytest.mark.parametrize("ignored", [False, True])
def test_stop_signals_raise_stop_unless_ignored_at_start(ignored):
    saved = {sig: signal.getsignal(sig) for sig in lifecycle.STOP_SIGNALS}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN if ignored else signal.SIG_DFL)
        handled = lifecycle.handle_signals()
        assert (signal.SIGHUP in handled) is not ignored
        assert signal.SIGTERM in handled
        with pytest.raises(lifecycle.Stop):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        if ignored:  # `nohup`: meant to outlive its parent, so no watch
            assert lifecycle.watch_parent() is None
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
