"""The session-start verify (hookverify.run): it replaces the forked child with `factbank
verify --quiet` in the session's repository, at most once per MIN_INTERVAL per repository,
and never outside a repository or with FACTBANK_VERIFY=0."""

from __future__ import annotations

import json
import os

import pytest

from factbank_client.hook import verify as hookverify


@pytest.fixture
def execs(monkeypatch, tmp_path):
    calls: list[tuple[str, list[str], str]] = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("FACTBANK_VERIFY", raising=False)
    monkeypatch.setattr(hookverify.os, "execv",
                        lambda exe, argv: calls.append((exe, list(argv), os.getcwd())))
    # run() points stdout/stderr at the log: keep pytest's own descriptors.
    monkeypatch.setattr(hookverify.os, "dup2", lambda a, b: None)
    here = os.getcwd()
    yield calls
    os.chdir(here)


def payload(cwd) -> bytes:
    return json.dumps({"session_id": "s1", "cwd": str(cwd)}).encode()


def test_verify_runs_once_per_interval_per_repository(execs, tmp_path):
    repo, other = tmp_path / "repo", tmp_path / "other"
    for r in (repo, other):
        (r / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    hookverify.run(payload(repo / "src"))
    assert len(execs) == 1
    _exe, argv, cwd = execs[0]
    assert argv[-2:] == ["verify", "--quiet"] and cwd == str(repo / "src")
    hookverify.run(payload(repo))  # a second start moments later: the first one covers it
    assert len(execs) == 1
    hookverify.run(payload(other))  # another repository has its own interval
    assert len(execs) == 2
    # Once the interval has passed, the next start verifies again.
    root = hookverify.repo_root(str(repo))
    assert hookverify.due(root, now=__import__("time").time() + hookverify.MIN_INTERVAL + 1)


def test_no_verify_outside_a_repository_or_when_turned_off(execs, tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    hookverify.run(payload(plain))
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    monkeypatch.setenv("FACTBANK_VERIFY", "0")
    hookverify.run(payload(tmp_path / "repo"))
    assert execs == []
