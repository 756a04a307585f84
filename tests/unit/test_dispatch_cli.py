"""`factbank dispatch` in a terminal (a subprocess), with a stand-in harness replaying the
stream the real Claude Code printed (tests/fixtures/dispatch/replay.py): the live log, the
exit code passed through, --detach then `show --follow`, `list`, and the refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dispatch"
CLI = [sys.executable, "-c", "import sys; from factbank_client.cli.main import main; "
       "sys.exit(main())"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    script = tmp_path / "fake-claude"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {FIXTURES / 'replay.py'} \"$@\"\n")
    script.chmod(0o755)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("FACTBANK_", "XDG_"))}
    return {**keep, "HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state"),
            "FACTBANK_CONFIG": str(tmp_path / "none.toml"),
            "FACTBANK_DISPATCH_CLAUDE": str(script),
            "REPLAY_FILE": str(FIXTURES / "claude.jsonl")}


def factbank(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env={**env, **extra}, capture_output=True,
                          text=True, timeout=120)


def test_the_live_log_and_the_harness_s_exit_code(env, tmp_path):
    proc = factbank(env, "dispatch", "claude", "Build and greet.", "--repo", str(tmp_path),
                    REPLAY_EXIT="3")
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert "$ echo built > out.txt && cat out.txt  -> 0\n    built\n" in out
    assert "$ ls missing-file  -> 2\n    ls: cannot access 'missing-file'" in out
    assert "✎ /tmp/CAPTURE/proj/src/app.py (Edit)\n" in out  # outside this repo: as given
    assert "» Done: built and edited src/app.py.\n" in out
    assert out.rstrip().endswith("# failed: claude exited with code 3")
    assert "claude failed, exit 3" in proc.stderr


def test_detach_then_follow_and_list(env, tmp_path):
    # The run ends when the test says so (REPLAY_UNTIL), not after a delay a loaded machine's
    # interpreter start-up can outlast: `show --follow` must find it running.
    release = tmp_path / "release"
    proc = factbank(env, "dispatch", "claude", "Build and greet.", "--repo", str(tmp_path),
                    "--detach", "--json", REPLAY_UNTIL=str(release))
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert run["status"] == "running"
    follower = subprocess.Popen([*CLI, "dispatch", "show", run["id"], "--follow"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follower.stdout is not None
        first = follower.stdout.readline()
        release.touch()
        rest, _ = follower.communicate(timeout=120)
    finally:
        release.touch()
        follower.kill()
    assert follower.returncode == 0
    assert first.startswith(f"run {run['id']}: claude running"), first
    assert (first + rest).rstrip().endswith("# done: claude exited with code 0")
    listed = factbank(env, "dispatch", "list")
    assert listed.stdout.splitlines()[0].split() == [
        "ID", "AGENT", "STATUS", "EXIT", "STARTED", "TOOK", "REPO", "TASK"]
    assert listed.stdout.splitlines()[1].split()[:4] == [run["id"], "claude", "done", "0"]
    lines = factbank(env, "dispatch", "show", run["id"], "--follow", "--json").stdout
    events = [json.loads(line) for line in lines.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_refusals_are_one_line_and_exit_2(env, tmp_path):
    proc = factbank(env, "dispatch", "claude", "x", "--repo", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"factbank: repo: {tmp_path / 'nope'} is not a directory"
    proc = factbank(env, "dispatch", "show", "20990101T000000000-000000")
    assert proc.returncode == 2 and "no run '20990101T000000000-000000'" in proc.stderr
    done = factbank(env, "dispatch", "claude", "x", "--repo", str(tmp_path), "--json")
    run = json.loads(done.stdout.splitlines()[-1])
    proc = factbank(env, "dispatch", "handoff", run["id"])
    assert proc.returncode == 2
    assert "is not in a git repository, so there is no project for a handoff" in proc.stderr


def test_ctrl_c_cancels_the_run_and_prints_its_end(env, tmp_path):
    proc = subprocess.Popen([*CLI, "dispatch", "claude", "wait", "--repo", str(tmp_path)],
                            env={**env, "REPLAY_SLEEP": "60"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    for line in proc.stdout:  # the whole captured stream is out: the harness now sleeps
        if line.startswith("# result:"):
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out.rstrip().endswith("# cancelled: claude was stopped by signal 15")
    assert err.rstrip().endswith("cancelled")
    listed = factbank(env, "dispatch", "list", "--json")
    assert [r["status"] for r in json.loads(listed.stdout)["runs"]] == ["cancelled"]
