"""every file the client writes (the git hook, with and without core.hooksPath,
the harness settings, Pi's extension, the install manifest, Codex's config as codex_trust
writes it, the login config, a rule patch, hook state, the timeline queue's pending file),
run against one table of hostile targets in a real git repository:

* the target is a link to a precious file, or a dangling link, or a directory: nothing is
  written through it, and it is not silently replaced (refused with a clear error, or, for
  the git hook, chained: the link itself is renamed and still points where it did);
* links planted at every temp name the writers ever used (`post-commit.factbank-tmp`,
  `<name>.tmp`, `<name>.<pid>.tmp`) point at the precious file: the write succeeds and the
  precious file keeps its bytes and mode.

Then the marker proofs: a foreign git hook or Pi extension that merely mentions factbank's
marker is chained or refused on install and left alone by uninstall."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from factbank_client import config, native, rulepatch
from factbank_client.errors import (
    GitInstallError,
    InstallError,
    MigrateError,
    ProposeError,
    UnsafePath,
)
from factbank_client.hook import record as hookrecord
from factbank_client.hook import state as hookstate
from factbank_client.install import common
from factbank_client.install import git as gitinstall
from factbank_client.install import harnesses as installer
from tests.unit.hostile_fs import git, layout

PRECIOUS = b'{"precious": true}\n'


@dataclass
class Writer:
    target: Callable[[Path, Path], Path]  # (repo, home) -> the file it writes
    run: Callable[[Path, Path], object]  # (repo, home) -> does the write
    refusals: tuple[type[BaseException], ...]  # how it says no
    chains: bool = False  # a foreign file there is kept beside ours (the git hook)
    consumes: bool = False  # a queue file: what is there is taken (renamed away), not read


def _paths(home: Path) -> common.Paths:
    return common.Paths.from_env({"HOME": str(home)})


def _hooks_path(repo: Path, home: Path) -> Path:
    git(repo, "config", "core.hooksPath", ".githooks")
    return repo / ".githooks" / "post-commit"


def _install(names):
    return lambda repo, home: installer.apply(installer.plan_install(names, _paths(home)))


def _propose(repo, home):
    cand = {"fact": {"id": 4, "content": "Use pnpm"}, "projects": ["a", "b"]}
    return rulepatch.propose(repo, cand, "AGENTS.md")


def _pending(home):
    os.environ["XDG_CACHE_HOME"] = str(home / ".cache")
    from factbank_client.hook import pending

    return Path(pending.pending_path(pending.safe_name("s1")))


WRITERS = {
    "git_hook": Writer(lambda r, h: r / ".git" / "hooks" / "post-commit",
                       lambda r, h: gitinstall.install(r, "/usr/bin/python3", str(h / "v.log")),
                       (GitInstallError,), chains=True),
    "git_hook_core_hookspath": Writer(
        _hooks_path, lambda r, h: gitinstall.install(r, "/usr/bin/python3", str(h / "v.log")),
        (GitInstallError,), chains=True),
    "claude_settings": Writer(lambda r, h: _paths(h).claude_settings(), _install(["claude"]),
                              (InstallError,)),
    "claude_json": Writer(lambda r, h: _paths(h).claude_json, _install(["claude"]),
                          (InstallError,)),
    "pi_extension": Writer(lambda r, h: _paths(h).pi_extension(), _install(["pi"]),
                           (InstallError,)),
    "install_manifest": Writer(lambda r, h: _paths(h).manifest, _install(["pi"]),
                               (InstallError,)),
    "codex_trust_config": Writer(  # codex_trust writes ~/.codex/config.toml with this
        lambda r, h: _paths(h).codex_config(),
        lambda r, h: installer.write_text(_paths(h).codex_config(), "[hooks]\n"),
        (InstallError,)),
    "login_config": Writer(lambda r, h: h / ".config" / "factbank" / "config.toml",
                           lambda r, h: config.save_login(
                               "http://127.0.0.1:8701", "fb_" + "t" * 43,
                               path=h / ".config" / "factbank" / "config.toml"),
                           (UnsafePath,)),
    "rule_patch": Writer(lambda r, h: r / ".git" / "factbank" / "rule-4.patch", _propose,
                         (ProposeError,)),
    "hook_state": Writer(
        lambda r, h: Path(hookstate._state_file("s1")),
        lambda r, h: hookstate.save("s1", {"n": 1}), (UnsafePath,)),
    "timeline_pending": Writer(lambda r, h: _pending(h),
                               lambda r, h: hookrecord.leave_pending("s1", ["a warning"]),
                               (UnsafePath,), consumes=True),
}

KINDS = ["link_to_precious", "dangling_link", "directory", "planted_temp_names"]


@pytest.fixture
def env(tmp_path, monkeypatch):
    lay = layout(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.chdir(lay.repo)
    precious = tmp_path / "precious.txt"
    precious.write_bytes(PRECIOUS)
    precious.chmod(0o640)
    return lay.repo, home, precious


def _temp_names(target: Path) -> list[Path]:
    names = {f"{target.name}.factbank-tmp", f"{target.name}.tmp",
             f"{target.name}.{os.getpid()}.tmp", f".{target.name}.tmp", "post-commit.factbank-tmp"}
    return [target.with_name(n) for n in sorted(names)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer", list(WRITERS))
def test_no_writer_follows_or_silently_replaces_a_hostile_target(env, writer, kind):
    repo, home, precious = env
    w = WRITERS[writer]
    target = w.target(repo, home)
    target.parent.mkdir(parents=True, exist_ok=True)
    never = precious.with_name("never-created.txt")
    if kind == "link_to_precious":
        target.symlink_to(precious)
    elif kind == "dangling_link":
        target.symlink_to(never)
    elif kind == "directory":
        target.mkdir()
    else:
        for name in _temp_names(target):
            name.symlink_to(precious)
    try:
        w.run(repo, home)
        outcome = "written"
    except w.refusals as exc:
        outcome = f"refused: {exc}"
    assert precious.read_bytes() == PRECIOUS and stat.S_IMODE(precious.stat().st_mode) == 0o640
    assert not never.exists()
    chained = target.with_name(gitinstall.CHAINED)
    if w.consumes and kind != "planted_temp_names":  # taken away unread, then written anew
        assert outcome == "written" and target.is_file() and not target.is_symlink()
        assert "precious" not in target.read_text()
    elif kind == "planted_temp_names":
        assert outcome == "written" and target.is_file() and not target.is_symlink()
        assert all(n.is_symlink() for n in _temp_names(target))  # left alone, not followed
    elif kind == "directory":
        assert outcome.startswith("refused") and target.is_dir(), outcome
    elif w.chains:  # the link was kept, renamed, still pointing where it did
        assert outcome == "written" and chained.is_symlink(), outcome
        assert os.readlink(chained) == str(precious if kind == "link_to_precious" else never)
        assert gitinstall.ours(target)
        gitinstall.uninstall(repo)  # puts the link back as it was
        assert target.is_symlink() and not chained.exists()
    else:
        assert outcome.startswith("refused"), outcome
        assert "symbolic link" in outcome
        assert target.is_symlink()  # not replaced


def test_native_backup_never_writes_into_a_planted_folder(env, monkeypatch, tmp_path):
    import shutil

    repo, _home, _precious = env
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    files, _ = native.scan("claude", repo)
    dest = native.backup("claude", files, repo)  # learn its name, then plant links there
    shutil.rmtree(dest)
    victim = tmp_path / "victim"
    victim.mkdir()
    (dest.parent / (dest.name + ".tmp")).symlink_to(victim)  # the old fixed temp name
    assert native.backup("claude", files, repo) == dest
    assert dest.is_dir() and not dest.is_symlink() and list(victim.iterdir()) == []
    shutil.rmtree(dest)
    dest.symlink_to(victim)
    with pytest.raises(MigrateError, match="symbolic link"):
        native.backup("claude", files, repo)
    assert list(victim.iterdir()) == []


# --- what is ours is proved, not guessed --------------------------------------------------------


FOREIGN = f"#!/bin/sh\n# not {gitinstall.MARKER}: the user's own hook that mentions it\nexit 0\n"


def test_a_foreign_hook_mentioning_the_marker_is_chained_and_survives(env):
    repo, home, _ = env
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(FOREIGN)
    hook.chmod(0o755)
    steps = gitinstall.install(repo, "/usr/bin/python3", str(home / "v.log"))
    assert (steps[0].action, steps[0].detail) == (
        "renamed", f"to {gitinstall.CHAINED}: your hook, kept and run first")
    assert (hook.with_name(gitinstall.CHAINED)).read_text() == FOREIGN
    gitinstall.uninstall(repo)
    assert hook.read_text() == FOREIGN  # back, byte for byte
    step = gitinstall.uninstall(repo)[0]
    assert (step.action, step.detail) == ("unchanged", "not factbank's: nothing to uninstall")
    assert hook.read_text() == FOREIGN


def test_uninstall_leaves_a_hook_edited_since_install(env):
    repo, home, _ = env
    gitinstall.install(repo, "/usr/bin/python3", str(home / "v.log"))
    hook = repo / ".git" / "hooks" / "post-commit"
    edited = hook.read_text() + "echo my own line\n"
    hook.write_text(edited)
    assert gitinstall.uninstall(repo)[0].action == "unchanged"
    assert hook.read_text() == edited


def test_a_committed_symlink_hook_under_core_hookspath_is_chained_not_written(env):
    repo, home, precious = env
    (repo / ".githooks").mkdir()
    (repo / ".githooks" / "post-commit").symlink_to(precious)
    (repo / ".githooks" / "post-commit.factbank-tmp").symlink_to(precious)
    git(repo, "add", ".githooks")
    git(repo, "commit", "-q", "-m", "hooks")
    git(repo, "config", "core.hooksPath", ".githooks")
    gitinstall.install(repo, "/usr/bin/python3", str(home / "v.log"))
    assert precious.read_bytes() == PRECIOUS
    assert os.readlink(repo / ".githooks" / gitinstall.CHAINED) == str(precious)


def test_a_foreign_pi_extension_mentioning_the_marker_is_refused_and_kept(env):
    _repo, home, _ = env
    ext = _paths(home).pi_extension()
    ext.parent.mkdir(parents=True)
    foreign = f"// my extension; not {common.PI_MARKER}\nexport default () => {{}}\n"
    ext.write_text(foreign)
    with pytest.raises(InstallError, match="not factbank's extension"):
        installer.plan_install(["pi"], _paths(home))
    installer.apply(installer.plan_uninstall(["pi"], _paths(home)))
    assert ext.read_text() == foreign


def test_pi_extension_installed_then_uninstalled_is_removed_by_its_recorded_hash(env):
    _repo, home, _ = env
    paths = _paths(home)
    installer.apply(installer.plan_install(["pi"], paths))
    manifest = json.loads(paths.manifest.read_text())
    assert manifest["harnesses"]["pi"]["files"][str(paths.pi_extension())]["sha256"]
    installer.apply(installer.plan_uninstall(["pi"], paths))
    assert not paths.pi_extension().exists()


def test_apply_refuses_a_file_changed_since_the_plan(env):
    _repo, home, _ = env
    paths = _paths(home)
    plan = installer.plan_install(["claude"], paths)
    settings = paths.claude_settings()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text('{"mine": 1}\n')
    with pytest.raises(InstallError, match="changed while"):
        installer.apply(plan)
    assert settings.read_text() == '{"mine": 1}\n'


def test_an_instruction_file_mentioning_the_block_markers_keeps_its_text(env):
    """The instruction block is ours only between the exact delimiter lines install writes:
    a user's note that mentions the markers is neither replaced nor cut out by uninstall."""
    _repo, home, _ = env
    md = _paths(home).claude_dir / "CLAUDE.md"
    md.parent.mkdir(parents=True)
    mine = ("# Mine\n\nWe once used <!-- factbank:begin --> as a marker; see\n"
            "<!-- factbank:begin (old) -->\nmy own notes\n<!-- factbank:end -->\n")
    md.write_text(mine)
    installer.apply(installer.plan_install(["claude"], _paths(home)))
    assert md.read_text().startswith(mine) and "my own notes" in md.read_text()
    installer.apply(installer.plan_uninstall(["claude"], _paths(home)))
    assert md.read_text() == mine


def test_a_settings_hook_that_mentions_factbank_is_the_users(env):
    """A handler is factbank's only when its command runs factbank's hook; one that merely
    mentions `factbank_client/hooks.py` is kept by install and by uninstall, byte for byte."""
    _repo, home, _ = env
    settings = _paths(home).claude_settings()
    settings.parent.mkdir(parents=True)
    theirs = {"type": "command", "command": "echo factbank_client/hooks.py session-start"}
    mine = json.dumps({"hooks": {"SessionStart": [{"hooks": [theirs]}]}}, indent=2) + "\n"
    settings.write_text(mine)
    installer.apply(installer.plan_install(["claude"], _paths(home)))
    groups = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert theirs in [h for g in groups for h in g["hooks"]] and len(groups) == 2
    installer.apply(installer.plan_uninstall(["claude"], _paths(home)))
    assert settings.read_text() == mine


def _verify_lock(repo: Path, home: Path) -> Path:
    import hashlib

    name = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:16]
    return home / ".cache" / "factbank" / f"verify-{name}.lock"


def _take_verify_lock(repo: Path, home: Path):
    from factbank_client.staleness import runlock

    lock = runlock.take(repo)  # OSError (ELOOP) through a link: the CLI says it in one line
    if lock is not None:
        lock.close()


def _ask_verify_again(repo: Path, home: Path):
    from factbank_client.staleness import runlock

    runlock._flag(str(_verify_lock(repo, home).with_suffix(".again")))


APPENDERS = {  # files opened in place (logs, queues, locks), not replaced
    "hooks_log": (lambda r, h: Path(hookstate.log_path()), lambda r, h: hookstate.log("x")),
    "timeline_queue": (lambda r, h: h / "q" / "buffer.jsonl",
                       lambda r, h: hookrecord.append(str(h / "q" / "buffer.jsonl"), [{"a": 1}])),
    "timeline_lock": (lambda r, h: h / "q" / "buffer.jsonl.lock",
                      lambda r, h: hookrecord._lock(str(h / "q" / "buffer.jsonl"), False)),
    "verify_lock": (_verify_lock, _take_verify_lock),
    "verify_again": (lambda r, h: _verify_lock(r, h).with_suffix(".again"), _ask_verify_again),
}


@pytest.mark.parametrize("kind", ["link_to_precious", "dangling_link"])
@pytest.mark.parametrize("name", list(APPENDERS))
def test_no_log_queue_or_lock_is_opened_through_a_link(env, name, kind):
    repo, home, precious = env
    target_of, run = APPENDERS[name]
    target = target_of(repo, home)
    target.parent.mkdir(parents=True, exist_ok=True)
    never = precious.with_name("never-created.txt")
    target.symlink_to(precious if kind == "link_to_precious" else never)
    try:
        run(repo, home)
    except OSError:
        pass  # refused (ELOOP): the hooks catch it, the CLI says it in one line
    assert precious.read_bytes() == PRECIOUS and not never.exists()
    assert target.is_symlink()
