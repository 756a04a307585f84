"""One background verify per repository, and a verify asked for while one runs is not lost:
the holder runs once more (real flocks; a second open file description in this process is
refused the lock exactly as another process would be)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from factbank_client.staleness import runlock


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    root.mkdir()
    return root


def test_a_request_during_a_run_makes_the_holder_run_once_more(repo) -> None:
    runs: list[str] = []
    asked: list[list[int]] = []

    def work() -> int:
        runs.append("run")
        if len(runs) == 1:  # a commit's verify arrives while the first run reads
            asked.append(runlock.run_once_more_if_asked(repo, lambda: 99))
        return len(runs)

    assert runlock.run_once_more_if_asked(repo, work) == [1, 2]
    assert asked == [[]]  # the late caller left at once, its run taken over
    assert runlock.run_once_more_if_asked(repo, work) == [3]  # the flag was used up


def test_a_burst_of_requests_during_one_run_costs_one_more_run(repo) -> None:
    runs: list[int] = []

    def work() -> None:
        runs.append(1)
        if len(runs) == 1:
            for _ in range(5):
                assert runlock.run_once_more_if_asked(repo, lambda: None) == []

    assert len(runlock.run_once_more_if_asked(repo, work)) == 2
    assert len(runs) == 2


def test_a_request_that_finds_the_lock_free_after_its_flag_runs_itself(repo) -> None:
    """The holder let go between the caller's first try and its flag: the caller's second
    try takes the lock and runs (nobody else would)."""
    held = runlock.take(repo)
    assert held is not None
    real_flag = runlock._flag

    def flag_then_release(path: str) -> None:
        real_flag(path)
        held.close()

    runlock._flag = flag_then_release
    try:
        assert runlock.run_once_more_if_asked(repo, lambda: "mine") == ["mine"]
    finally:
        runlock._flag = real_flag


def test_another_process_holding_the_lock_gets_the_request(repo, tmp_path) -> None:
    """Across processes: a child holds the lock, this process asks and leaves; the child's
    next run is the one asked for."""
    script = textwrap.dedent(f"""
        import os, sys, time
        os.environ["XDG_CACHE_HOME"] = {str(tmp_path / "cache")!r}
        from pathlib import Path
        from factbank_client.staleness import runlock
        runs = []
        def work():
            runs.append(1)
            if len(runs) == 1:
                print("holding", flush=True)
                sys.stdin.readline()  # the parent asks meanwhile
            return len(runs)
        print(runlock.run_once_more_if_asked(Path({str(repo)!r}), work), flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        assert runlock.run_once_more_if_asked(repo, lambda: "parent") == []
        out, _ = child.communicate("go\n", timeout=30)
    finally:
        child.kill()
    assert out.strip() == "[1, 2]"
