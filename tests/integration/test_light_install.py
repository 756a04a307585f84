"""The light client install: a fresh venv with only the client's dependencies, no server extra.

It holds a copy of the project installed with `pip install --no-deps -e` (a copy, so the build's
egg-info never lands in the checkout) and the `[project] dependencies` of pyproject.toml, and
nothing else: no --system-site-packages, so no asyncpg, litestar or numpy. Every module of
`factbank_client` must import there without importing server or eval code, `factbank --help`
must list exactly the client commands and name the extra, and a server command must say how to
get it. Creating the venv costs about 45 s of CPU (pip, from its cache; 2-3 minutes of wall
time with the shared cores busy): `slow`, but in the default run. Without a package index pip
cannot install the dependencies: then it skips, saying so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from factbank_client.cli.main import build_parser

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# What the server and eval groups add to `factbank` (and only they).
SERVER_COMMANDS = ("up", "status", "down", "migrate", "serve", "admin", "eval", "bench")
HINT = "pip install 'factbank[server]'"
NO_INDEX = re.compile(r"No matching distribution|Could not find a version|NewConnectionError|"
                      r"Network is unreachable|Temporary failure in name resolution|"
                      r"Max retries exceeded|ConnectTimeout")

IMPORT_ALL = """
import importlib, json, pkgutil, sys
import factbank_client
names = [m.name for m in pkgutil.walk_packages(factbank_client.__path__, "factbank_client.")]
# The dashboard is a litestar app (litestar is a light-client dependency for it): it is
# imported last, so `heavy` says whether anything else (a hook, the CLI) pulls litestar in.
dash = [n for n in names if n.startswith("factbank_client.dashboard")]
failed = {}
heavy = None
for name in [n for n in names if n not in dash] + [None] + dash:
    if name is None:
        heavy = sorted(n for n in ("asyncpg", "litestar", "numpy") if n in sys.modules)
        continue
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = repr(exc)
ours = ("factbank", "factbank_evals", "factbank_ingest", "factbank_recall", "factbank_migrations")
server = sorted(n for n in sys.modules if n.split(".")[0] in ours)
print(json.dumps({"imported": names, "failed": failed, "server": server, "heavy": heavy,
                  "dashboard": dash}))
"""


def _pip(venv: Path, *args: str) -> None:
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        output = proc.stdout + proc.stderr
        if NO_INDEX.search(output):
            pytest.skip(f"no package index for pip here: {output.strip().splitlines()[-1]}")
        pytest.fail(f"pip install {' '.join(args)} failed:\n{output[-3000:]}")


def _copy_project(dest: Path) -> Path:
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "*.egg-info", "reports")
    for folder in ("services", "clients", "evals", "migrations"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def light(tmp_path_factory) -> Path:
    """The light venv's bin folder."""
    root = tmp_path_factory.mktemp("light")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    # The build backend goes in with the dependencies, so the editable install needs no
    # isolated build environment of its own (a second venv, ~20 s).
    _pip(venv, *project["project"]["dependencies"], *project["build-system"]["requires"])
    _pip(venv, "--no-deps", "--no-build-isolation", "-e", str(_copy_project(root / "project")))
    return venv / "bin"


def _commands(help_text: str) -> list[str]:
    """The command names `factbank --help` lists under COMMAND."""
    block = help_text.split("COMMAND\n", 1)[1].split("\noptions:", 1)[0]
    return re.findall(r"^    (\S+)", block, flags=re.MULTILINE)


def test_every_client_module_imports_without_the_server_extra(light):
    proc = subprocess.run([str(light / "python"), "-c", IMPORT_ALL], capture_output=True,
                          text=True, timeout=300, cwd=light)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert {"factbank_client.cli.main", "factbank_client.cli.facts", "factbank_client.hooks",
            "factbank_client.mcp_server",
            "factbank_client.install.harnesses"} <= set(result["imported"])
    assert result["failed"] == {}
    assert result["server"] == [] and result["heavy"] == []
    assert {"factbank_client.dashboard.app", "factbank_client.dashboard.security",
            "factbank_client.dashboard.dispatch_page",
            "factbank_client.dashboard.base"} <= set(result["dashboard"])


def test_light_help_lists_only_client_commands_and_names_the_extra(light):
    full = _commands(build_parser().format_help())
    assert set(SERVER_COMMANDS) <= set(full)
    proc = subprocess.run([str(light / "factbank"), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=light, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert _commands(proc.stdout) == [c for c in full if c not in SERVER_COMMANDS]
    assert "the server, admin and eval commands need " + HINT in proc.stdout


@pytest.mark.parametrize("argv", [["up"], ["admin", "bank", "list"], ["eval", "beir", "x"]])
def test_a_server_command_in_the_light_install_says_how_to_get_the_extra(light, argv):
    proc = subprocess.run([str(light / "factbank"), *argv], capture_output=True, text=True,
                          timeout=120, cwd=light, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert f"invalid choice: '{argv[0]}'" in proc.stderr and HINT in proc.stderr
    assert "Traceback" not in proc.stderr
