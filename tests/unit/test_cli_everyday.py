"""what users expect of a CLI and missed: `--version`, shell completion, `doctor`,
`--json` on install/uninstall, and `install all` writing only for the harnesses present."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from factbank_client.cli.doctor import script
from factbank_client.cli.main import build_parser

HARNESS_ENV = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "XDG_CONFIG_HOME",
               "FACTBANK_CONFIG", "FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN",
               "FACTBANK_TEAM_TOKEN")


def cli(home: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    """`factbank ARGS` with HOME=`home` and, when given, PATH=`path` (plus python's dir)."""
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV}
    env["HOME"] = str(home)
    if path is not None:
        env["PATH"] = os.pathsep.join([path, "/usr/bin", "/bin"])
    code = "import sys; from factbank_client.cli.main import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_version(tmp_path):
    done = cli(tmp_path, "--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"factbank {version('factbank')}"


# --- completion ----------------------------------------------------------------------------

COMPLETIONS = [
    (["ins"], {"install"}),
    (["st"], {"status", "stats"}),
    (["do"], {"down", "doctor"}),
    (["install", ""], {"claude", "codex", "pi", "all", "git", "--dry-run", "--json"}),
    (["install", "claude", "--d"], {"--dry-run"}),
    (["admin", "token", ""], {"issue", "list", "revoke", "rotate"}),
    (["admin", "token", "issue", "--s"], {"--scopes"}),
    (["search", "pnpm", "--js"], {"--json"}),
    (["completion", ""], {"bash", "zsh", "fish"}),
    (["login", "--f"], {"--force"}),
]


def _bash_complete(script_path: Path, words: list[str]) -> set[str]:
    line = " ".join(f"'{w}'" for w in ["factbank", *words])
    shell = (f"source {script_path}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; "
             "_factbank_complete; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return {w for w in done.stdout.split("\n") if w}


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "factbank.bash"
    path.write_text(script("bash", build_parser()))
    return path


@pytest.mark.parametrize(("words", "expected"), COMPLETIONS)
def test_bash_completes_commands_subcommands_choices_and_options(bash_script, words, expected):
    got = _bash_complete(bash_script, words)
    assert expected <= got, (words, got)
    prefix = words[-1]
    assert all(w.startswith(prefix) for w in got)


def test_every_command_is_completed(bash_script):
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    assert commands <= _bash_complete(bash_script, [""])


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_is_valid_for_its_shell(tmp_path, shell):
    done = cli(tmp_path, "completion", shell)
    assert done.returncode == 0 and "factbank" in done.stdout
    if shell == "zsh":
        assert done.stdout.startswith("autoload -U +X bashcompinit")
    if shell == "fish":
        assert "complete -c factbank -n '__fish_seen_subcommand_from install' -a" in done.stdout
    binary = shutil.which(shell)
    if binary is None:
        pytest.skip(f"{shell} is not installed here; its script was generated")
    (tmp_path / "s").write_text(done.stdout)
    check = subprocess.run([binary, "-n", str(tmp_path / "s")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# --- install all: only the harnesses present -----------------------------------------------


def test_install_all_writes_only_for_harnesses_present(tmp_path):
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    (home / ".claude").mkdir(parents=True)
    bin_dir.mkdir()
    done = cli(home, "install", "all", "--json", path=str(bin_dir))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["harnesses"] == ["claude"]
    assert result["skipped"] == ["codex", "pi", "gemini", "qwen", "opencode", "copilot"]
    assert {c["action"] for c in result["changes"]} == {"created"}
    assert not (home / ".codex").exists() and not (home / ".pi").exists()
    # A harness whose program is on PATH is present, before it ever ran.
    (bin_dir / "pi").write_text("#!/bin/sh\n")
    (bin_dir / "pi").chmod(0o755)
    done = cli(home, "install", "all", path=str(bin_dir))
    assert done.returncode == 0, done.stderr
    assert (home / ".pi" / "agent" / "extensions" / "factbank.ts").exists()
    assert "skipped codex: not on this machine" in done.stdout
    assert not (home / ".codex").exists()
    # Named explicitly: installed although absent.
    assert cli(home, "install", "codex", path=str(bin_dir)).returncode == 0
    assert (home / ".codex" / "hooks.json").exists()
    done = cli(home, "uninstall", "all", "--json", path=str(bin_dir))
    assert done.returncode == 0
    assert {c["action"] for c in json.loads(done.stdout)["changes"]} >= {"deleted"}


def test_install_all_with_no_harness_says_so(tmp_path):
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    done = cli(home, "install", "all", path=str(bin_dir))
    assert done.returncode == 2 and "no harness found" in done.stderr
    assert sorted(p.name for p in home.iterdir()) == []


# --- doctor ----------------------------------------------------------------------------------


def test_doctor_without_a_login_fails_and_says_how_to_fix(tmp_path):
    done = cli(tmp_path, "doctor", "--json", path=str(tmp_path))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False
    config = next(c for c in report["checks"] if c["name"] == "config")
    assert config["status"] == "fail" and "factbank login" in config["fix"]
    assert {c["name"] for c in report["checks"]} >= {"hooks claude", "hooks codex", "hooks pi"}
    text = cli(tmp_path, "doctor", path=str(tmp_path))
    assert text.returncode == 1 and "fix: factbank login" in text.stdout


def test_doctor_names_a_broken_saved_url(tmp_path):
    cfg = tmp_path / ".config" / "factbank" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('url = "http://127.0.0.1:8701"\nrecall_url = "//127.0.0.1:81/127.0.0.1:8701"'
                   '\n[banks.personal]\ntoken = "fb_x"\n')
    done = cli(tmp_path, "doctor", "--json", path=str(tmp_path))
    assert done.returncode == 1
    checks = json.loads(done.stdout)["checks"]
    assert any(c["name"] == "config" and c["status"] == "warn"
               and "recall_url is saved as '//127.0.0.1:81/127.0.0.1:8701'" in c["detail"]
               for c in checks), checks
    assert any(c["name"] == "recall" and c["status"] == "fail" for c in checks)
