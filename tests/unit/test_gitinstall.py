"""Staleness "checked without anyone asking": `factbank install git`'s post-commit hook (a
real repository, real commits) and the SessionStart hook's background verify (the hook
process exactly as the harnesses run it)."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from factbank_client.cli.main import main
from factbank_client.install import git as gitinstall
from tests.conftest import git
from tests.unit.hook_standins import HookEnv, StandIn, parse


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "a.txt").write_text("one\n")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "init")
    return r


def fake_python(tmp_path: Path) -> tuple[str, Path]:
    """A stand-in for the interpreter the hook runs: records its arguments and cwd."""
    out = tmp_path / "ran.txt"
    exe = tmp_path / "python"
    exe.write_text(f'#!/bin/sh\necho "$PWD $*" >> {out}\n')
    exe.chmod(0o755)
    return str(exe), out


def wait_for(path: Path, text: str, limit: float = 30.0) -> str:
    """The file's text once it contains `text` (a background process writes it)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if path.exists() and text in path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never got {text!r}: "
                         f"{path.read_text() if path.exists() else '(missing)'}")


def test_post_commit_hook_runs_verify_after_each_commit(repo, tmp_path, monkeypatch):
    python, ran = fake_python(tmp_path)
    steps = gitinstall.install(repo, python, str(tmp_path / "log" / "verify.log"))
    hook = repo / ".git" / "hooks" / "post-commit"
    assert [s.action for s in steps] == ["created"] and hook.stat().st_mode & stat.S_IXUSR
    assert [s.action for s in gitinstall.install(repo, python, str(tmp_path / "v.log"))] == \
        ["updated"]
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-q", "-am", "change")
    assert wait_for(ran, "verify").strip() == \
        f"{repo} -m factbank_client.cli.main verify --quiet"
    assert [s.action for s in gitinstall.uninstall(repo)] == ["deleted"]
    assert not hook.exists()


def test_an_existing_hook_is_chained_and_restored_byte_for_byte(repo, tmp_path):
    hooks = repo / ".git" / "hooks"
    theirs = hooks / "post-commit"
    original = b"#!/bin/sh\n# the user's own hook\r\necho theirs >> \"$(git rev-parse " \
               b"--git-dir)/theirs.txt\"\nexit 3\n"
    theirs.write_bytes(original)
    theirs.chmod(0o750)
    python, ran = fake_python(tmp_path)
    steps = gitinstall.install(repo, python, str(tmp_path / "v.log"))
    assert steps[0].action == "renamed" and gitinstall.CHAINED in steps[0].detail
    assert (hooks / gitinstall.CHAINED).read_bytes() == original
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-q", "-am", "change")
    assert (repo / ".git" / "theirs.txt").read_text() == "theirs\n"  # theirs ran first
    wait_for(ran, "verify --quiet")
    # the hook's exit status is the chained hook's (git ignores it for post-commit, but a
    # caller running the hook by hand sees what the user's hook said)
    assert subprocess.run([str(theirs)], cwd=repo, env={**os.environ, "FACTBANK_VERIFY": "0"}
                          ).returncode == 3
    gitinstall.install(repo, python, str(tmp_path / "v.log"))  # a re-install changes nothing
    assert (hooks / gitinstall.CHAINED).read_bytes() == original
    assert gitinstall.uninstall(repo)[0].action.startswith("restored")
    assert theirs.read_bytes() == original
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o750
    assert not (hooks / gitinstall.CHAINED).exists()
    step = gitinstall.uninstall(repo)[0]
    assert (step.action, step.detail) == ("unchanged", "not factbank's: nothing to uninstall")


def test_core_hooks_path_is_honoured_and_dry_run_writes_nothing(repo, tmp_path, capsys,
                                                              monkeypatch):
    git(repo, "config", "core.hooksPath", ".githooks")
    monkeypatch.chdir(repo)
    assert main(["install", "git", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"+++ {repo / '.githooks' / 'post-commit'}" in out and "+# factbank-post-commit" in out
    assert not (repo / ".githooks").exists()
    assert main(["install", "git"]) == 0
    assert gitinstall.ours(repo / ".githooks" / "post-commit")
    assert main(["uninstall", "git"]) == 0
    assert not (repo / ".githooks" / "post-commit").exists()


def test_pre_push_hook_is_optional_chained_and_proved_ours(repo, tmp_path, capsys,
                                                           monkeypatch):
    """`install git --pre-push`: the hook runs `verify --diff` from what the remote has to
    what is pushed (a real bare remote, a real push); an existing pre-push is chained (run
    first, its refusal kept) and given back byte for byte; an edited copy of ours is not
    ours; `--pre-push` without `git` is refused."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    hooks = repo / ".git" / "hooks"
    original = b"#!/bin/sh\ncat > \"$(git rev-parse --git-dir)/theirs.txt\"\nexit 0\n"
    (hooks / "pre-push").write_bytes(original)
    (hooks / "pre-push").chmod(0o755)
    python, ran = fake_python(tmp_path)
    steps = gitinstall.install(repo, python, str(tmp_path / "v.log"), pre_push=True)
    assert [s.action for s in steps] == ["created", "renamed", "created"]
    assert gitinstall.ours(hooks / "pre-push") and gitinstall.ours(hooks / "post-commit")
    pushed_from = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-q", "-am", "change", env={**os.environ, "FACTBANK_VERIFY": "0"})
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "push", "-q", "origin", "main")
    assert f"refs/heads/main {head}" in (repo / ".git" / "theirs.txt").read_text()  # ran first
    assert f"{repo} -m factbank_client.cli.main verify --diff {pushed_from}...{head} " \
        "--fail-on never" in ran.read_text()
    # An edited copy is foreign: never replaced nor removed as ours.
    text = (hooks / "pre-push").read_text()
    (hooks / "pre-push").write_text(text.replace("fail=never", "fail=stale"))
    assert not gitinstall.ours(hooks / "pre-push")
    (hooks / "pre-push").write_text(text)
    assert [s.action for s in gitinstall.uninstall(repo)] == ["deleted", "restored"]
    assert (hooks / "pre-push").read_bytes() == original
    monkeypatch.chdir(repo)
    assert main(["install", "claude", "--pre-push", "--dry-run"]) == 2
    assert "--pre-push is a git hook" in capsys.readouterr().err


def test_session_start_starts_verify_in_the_background(tmp_path, standin: StandIn):
    hook = HookEnv(tmp_path, standin.url, {"personal": "tok-personal"})
    standin.texts["tok-personal"] = "[factbank] Remembered facts: ..."
    code, out, err, _ = hook.run("session-start", hook.session_start())
    assert code == 0 and err == ""
    parse("SessionStart", out)  # the session block, exactly as before
    # The check ran after the hook had exited, in the repository: the stand-in has no
    # GET /v1/facts, so the verify's one line in its log is that refusal.
    log = wait_for(hook.home / ".cache" / "factbank" / "verify.log", "factbank:")
    assert "501" in log
    code, out, _, _ = hook.run("session-start", hook.session_start(sid="s2"),
                               FACTBANK_VERIFY="0")
    assert code == 0
