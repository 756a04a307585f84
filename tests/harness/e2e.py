"""What the end-to-end harness tests share: the real services, a user's machine, polling.

* `running_stack()`: one `factbank up` (embedded Postgres, both services, free ports,
  FACTBANK_HOME in a temp dir) with its embedding model warmed; the conftest starts it once a
  session. `Stack.bank(name)` makes a fresh personal bank on it and returns its `Services`:
  each test module gets its own bank (the conftest's `services` fixture), as separate as the
  stack of its own it had before (every route is bank-scoped), for the cost of two
  `factbank admin` calls instead of a `factbank up` and a model load (measured in
  tests/harness/README.md).
* A user's machine: a throwaway HOME (`home_env`) logged in (`login`), `factbank install`
  run into it (`install`), repositories (`make_repo` without the git binary, `repository`
  with it), git run as that user (`git`).
* `cli`, `cli_env`: `factbank` in a terminal with a harness's variables (dispatch, enrich).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from factbank.cli.server import _bank_name as first_run_bank_name
from factbank.runtime.runner import free_port
from tests.conftest import git as run_git
from tests.conftest import git_env
from tests.terminal import default_signals

from .fake_model import FakeModel
from .npm import Harnesses
from .runners import configure_codex_home

CLI = [sys.executable, "-c", "import sys; from factbank_client.cli.main import main; "
       "sys.exit(main())"]
# The runner's own harness and factbank settings: never seen by a user's throwaway HOME.
NOT_THE_USERS = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "XDG_CONFIG_HOME",
                 "XDG_CACHE_HOME", "XDG_DATA_HOME", "FACTBANK_CONFIG", "FACTBANK_URL",
                 "FACTBANK_RECALL_URL", "FACTBANK_TOKEN", "FACTBANK_TEAM_TOKEN")
APP = {"src/app.py": "print('hello')\n"}
FAIL = "ls missing-file"  # a command that fails, exit 2


# --- the services -----------------------------------------------------------------------------


@dataclass
class Services:
    """One bank on the running services: its token and the calls the tests make."""

    ingest: str
    recall: str
    token: str
    log: Path | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def add(self, content: str, category: str, project: str | None, tags: list[str]) -> int:
        body: dict[str, Any] = {"content": content, "category": category,
                                "source": {"kind": "user"}, "quote": content,
                                "origin": "user", "tags": tags}
        if project:
            body["project"] = project
        r = httpx.post(f"{self.ingest}/v1/facts", json=body, headers=self.headers(), timeout=60)
        assert r.status_code == 201, r.text
        return int(r.json()["fact"]["id"])

    def facts(self, **params: str) -> list[dict]:
        r = httpx.get(f"{self.recall}/v1/facts", params=params, headers=self.headers(),
                      timeout=30)
        assert r.status_code == 200, r.text
        return r.json()["facts"]

    def timeline(self, project: str) -> list[dict]:
        r = httpx.get(f"{self.recall}/v1/timeline", params={"project": project, "limit": 500},
                      headers=self.headers(), timeout=30)
        assert r.status_code == 200, r.text
        return r.json()["events"]

    def require_inject(self) -> None:
        body = {"kind": "session", "session_id": "probe", "project": None, "prompt": None}
        r = httpx.post(f"{self.recall}/v1/inject", json=body, headers=self.headers(), timeout=30)
        if r.status_code == 404:
            pytest.skip("the recall service has no /v1/inject yet")
        assert r.status_code == 200, f"{r.text}\n{self.log_tail()}"

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log and self.log.exists() else ""


@dataclass
class Stack:
    """A running `factbank up`: its URLs, its log and the environment it runs in."""

    ingest: str
    recall: str
    log: Path
    env: dict[str, str]

    def bank(self, name: str) -> Services:
        """A new personal bank `name` (`factbank admin`, on the running embedded Postgres)
        and a token for its owner, the member `factbank up`'s first run names (this machine's
        user: what the timeline and handoffs show)."""
        owner = first_run_bank_name()
        for args in (("bank", "create", name, "--kind", "personal"),
                     ("token", "issue", name, owner, "--scopes", "read,write,admin", "--json")):
            proc = subprocess.run([*CLI, "admin", *args], env=self.env, capture_output=True,
                                  text=True, timeout=120)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return Services(self.ingest, self.recall, json.loads(proc.stdout)["token"], self.log)


@contextmanager
def running_stack() -> Iterator[Stack]:
    """`factbank up` as a subprocess, ready (first-run token printed, /readyz 200) and warm."""
    home = Path(tempfile.mkdtemp(prefix="factbank-e2e-")) / "home"
    ingest, recall = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(FACTBANK_HOME=str(home), FACTBANK_INGEST_PORT=str(ingest),
               FACTBANK_RECALL_PORT=str(recall))
    log = home.parent / "up.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*CLI, "up"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=default_signals,  # tests/terminal.py says why
                                text=True)
    try:
        token = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"factbank up exited:\n{log.read_text()}")
            text = log.read_text()
            found = re.findall(r"fb_[A-Za-z0-9_-]{20,}", text)
            if found and "Ctrl-C stops" in text:
                token = found[0]
                try:
                    if httpx.get(f"http://127.0.0.1:{recall}/readyz", timeout=2).status_code \
                            == 200:
                        break
                except httpx.HTTPError:
                    pass
            time.sleep(0.1)
        else:
            raise AssertionError(f"factbank up not ready:\n{log.read_text()}")
        stack = Stack(f"http://127.0.0.1:{ingest}", f"http://127.0.0.1:{recall}", log, env)
        warm_up(Services(stack.ingest, stack.recall, token, log))
        yield stack
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home.parent, ignore_errors=True)


def warm_up(svc: Services) -> None:
    """The first prompt recall of a fresh service loads the embedding model (seconds); a hook
    gives up after 0.9 s, so warm it once, as a long-running service would be."""
    body = {"kind": "prompt", "session_id": "warm-up", "project": None, "prompt": "warm up"}
    try:
        httpx.post(f"{svc.recall}/v1/inject", json=body, headers=svc.headers(), timeout=180)
    except httpx.HTTPError:
        pass


# --- a user's machine ----------------------------------------------------------------------


def home_env(home: Path) -> dict[str, str]:
    """This process's environment as the user of `home` sees it: their HOME, with the tests'
    git identity, and none of the runner's own harness or factbank settings."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_THE_USERS}
    return git_env({**env, "HOME": str(home)})


def login(home: Path, svc: Services) -> None:
    cfg = home / ".config" / "factbank" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f'url = "{svc.ingest}"\nrecall_url = "{svc.recall}"\n\n'
                   f'[banks.personal]\ntoken = "{svc.token}"\n')


def factbank(home: Path, *args: str, cwd: Path | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    """`factbank ARGS` in a terminal of the user of `home`."""
    return subprocess.run([*CLI, *args], env=home_env(home), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def install(home: Path, *args: str) -> str:
    proc = factbank(home, "install", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def install_all_for_codex_to_claude(home: Path, svc: Services, fake_model: FakeModel,
                                    harnesses: Harnesses) -> None:
    """Everything installed, Codex's hooks trusted, and Codex given time to start factbank's
    MCP server: codex exec sends its first request ~1.5 s after start without waiting for MCP
    servers, and the factbank server needs ~2 s to import the MCP SDK here. (Interactive Codex
    has the server up long before the user's first prompt.)"""
    login(home, svc)
    configure_codex_home(home, fake_model)
    # named, not `all`: `all` takes only harnesses on PATH or with a config directory, and
    # this HOME is new and the binaries are not on PATH
    install(home, "claude", "codex", "pi", "--trust", "--codex-bin", str(harnesses.codex))
    cfg = home / ".codex" / "config.toml"
    cfg.write_text("mcp_optional_startup_grace_ms = 15000\n" + cfg.read_text())


def make_repo(root: Path, name: str, remote: str) -> Path:
    """A directory the client takes for a repository with `remote` (no git binary needed)."""
    repo = root / name
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {remote}\n')
    return repo


def git(repo: Path, *args: str, home: Path | None = None) -> str:
    """`git -C repo ARGS` as the user of `home`, else with no HOME and no system config."""
    env = home_env(home) if home else {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                       "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}
    return run_git(repo, *args, env=env)


def repository(repo: Path, remote: str, files: dict[str, str] = APP, *,
               home: Path | None = None) -> Path:
    """A real git repository on `main` whose origin is `remote`, `files` committed."""
    repo.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q", "-b", "main", home=home)
    git(repo, "remote", "add", "origin", remote, home=home)
    git(repo, "add", "-A", home=home)
    git(repo, "commit", "-q", "-m", "init", home=home)
    return repo


def cli_env(home: Path, state: Path, base: dict[str, str], binary: Path) -> dict[str, str]:
    """A terminal on the user's machine: their HOME (factbank installed and logged in), the
    harness's own variables, the dispatch store under XDG_STATE_HOME."""
    return {**base, "XDG_STATE_HOME": str(state), "FACTBANK_DISPATCH_CLAUDE": str(binary),
            "PYTHONPATH": os.environ.get("PYTHONPATH", "")}


def cli(env: dict[str, str], *args: str, timeout: float = 180,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`factbank ARGS` in that terminal; with FACTBANK_DISPATCH_CAPTURE set, what it printed is
    appended to that file (docs/dispatch.md's output)."""
    proc = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
    capture = os.environ.get("FACTBANK_DISPATCH_CAPTURE")
    if capture:
        with open(capture, "a", encoding="utf-8") as fh:
            fh.write(f"$ factbank {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
    return proc


def hook_log(home: Path) -> str:
    path = home / ".cache" / "factbank" / "hooks.log"
    return path.read_text() if path.exists() else ""


def assert_ok(result: Any, home: Path) -> None:
    assert result.returncode == 0, result.describe() + "\n--- hooks.log ---\n" + hook_log(home)


def seed_facts(svc: Services, tag: str, project: str) -> tuple[str, str, str]:
    """A project fact (injected at session start in that repository only) and a global
    gotcha (not an auto-injected category: only a prompt about it recalls it). Returns their
    unique markers and the prompt that should recall the gotcha."""
    session_marker = f"FBS{tag}"
    prompt_marker = f"FBP{tag}"
    worker = f"{tag.lower()}-worker"
    svc.add(f"The {project} repository is built with the command `just build-{session_marker}`.",
            "project", project, ["build", "构建", "just"])
    svc.add(f"Starting {worker} fails with EADDRINUSE on port 8443 while an old {worker} "
            f"process ({prompt_marker}) still holds the port; stop it first.",
            "gotchas", None, ["EADDRINUSE", "port 8443", "端口", worker])
    prompt = f"Starting {worker} fails with EADDRINUSE on port 8443. Why, and what do I do?"
    return session_marker, prompt_marker, prompt

