"""One compose project of compose.yaml (+ compose.ci.yaml's local images), driven from the host.

The stack is reached only the ways a user reaches it: the ports it publishes on
$FACTBANK_BIND (a loopback address of its own, so two stacks and the host's own services
never collide), and `docker compose exec/run/cp` for what an operator does on the server
(admin commands, psql inside the postgres container, backups).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.compose.engine import ROOT, Engine

COMPOSE = ROOT / "compose.yaml"
COMPOSE_CI = ROOT / "compose.ci.yaml"
APP_IMAGE = os.environ.get("FACTBANK_IMAGE", "factbank:local")


def use_public_images() -> bool:
    """FACTBANK_COMPOSE_PUBLIC=1: compose.yaml alone (a machine that can pull the images)."""
    return os.environ.get("FACTBANK_COMPOSE_PUBLIC") == "1"


def compose_files() -> list[Path]:
    return [COMPOSE] if use_public_images() else [COMPOSE, COMPOSE_CI]


def write_env_file(path: Path) -> Path:
    """The env file, written by ops/init-env as a user would (random password, mode 600)."""
    subprocess.run(
        [sys.executable, str(ROOT / "ops" / "init-env"), str(path)], check=True, capture_output=True
    )
    assert path.stat().st_mode & 0o777 == 0o600
    return path


@dataclass
class Stack:
    engine: Engine
    project: str
    bind: str
    env_file: Path
    files: list[Path] = field(default_factory=compose_files)
    timings: dict[str, float] = field(default_factory=dict)

    # --- compose ----------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        return {
            **self.engine.env,
            "FACTBANK_ENV_FILE": str(self.env_file),
            "FACTBANK_BIND": self.bind,
            "FACTBANK_IMAGE": APP_IMAGE,
        }

    def compose(
        self, *args: str, check: bool = True, timeout: float = 600, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.engine.compose, "--project-name", self.project]
        for f in self.files:
            argv += ["--file", str(f)]
        r = subprocess.run(
            [*argv, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=ROOT,
            timeout=timeout,
            input=input,
        )
        if check and r.returncode != 0:
            raise RuntimeError(
                f"docker compose {' '.join(args)} failed ({r.returncode}):\n"
                f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            )
        return r

    def up(self, *services: str, wait_timeout: int = 300) -> float:
        start = time.monotonic()
        r = self.compose(
            "up",
            "--detach",
            "--wait",
            "--wait-timeout",
            str(wait_timeout),
            *services,
            check=False,
            timeout=wait_timeout + 120,
        )
        if r.returncode != 0:
            logs = self.compose("logs", "--no-color", "--tail", "40", check=False).stdout
            ps = self.compose("ps", "--all", check=False).stdout
            raise RuntimeError(f"up --wait failed:\n{r.stderr[-3000:]}\n{ps}\n{logs[-6000:]}")
        return time.monotonic() - start

    def down(self, *, volumes: bool) -> None:
        args = ["down", "--timeout", "20"] + (["--volumes"] if volumes else [])
        self.compose(*args, timeout=300)

    def exec(
        self,
        service: str,
        *argv: str,
        check: bool = True,
        timeout: float = 300,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`docker exec` in the service's container. Not `docker compose exec`: Compose 2.40
        against Engine 20.10 answers 0 whatever the command's exit status (seen here)."""
        options = ["--interactive"] if input is not None else []
        for key, value in (env or {}).items():
            options += ["--env", f"{key}={value}"]
        return self.engine.docker(
            "exec",
            *options,
            self.container(service),
            *argv,
            check=check,
            timeout=timeout,
            input=input,
        )

    def ps(self) -> list[dict[str, Any]]:
        out = self.compose("ps", "--all", "--format", "json").stdout.strip()
        if not out:
            return []
        if out.startswith("["):
            return json.loads(out)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def container(self, service: str) -> str:
        return self.compose("ps", "--all", "--quiet", service).stdout.split()[0]

    def inspect(self, service: str) -> dict[str, Any]:
        cid = self.container(service)
        return json.loads(self.engine.docker("inspect", cid).stdout)[0]

    def health(self, service: str) -> str:
        """`healthy`/`unhealthy`/`starting` while running, else the state (`exited`, ...)."""
        state = self.inspect(service)["State"]
        if state["Status"] != "running":
            return state["Status"]
        return (state.get("Health") or {}).get("Status") or state["Status"]

    def wait_healthy(self, service: str, timeout: float = 180) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.health(service) == "healthy":
                return time.monotonic() - start
            time.sleep(0.5)
        raise TimeoutError(f"{service} not healthy after {timeout:.0f} s")

    # --- operator actions -------------------------------------------------------------------

    def psql(self, sql: str, database: str = "factbank") -> str:
        r = self.exec(
            "postgres",
            "psql",
            "--username=factbank",
            f"--dbname={database}",
            "--no-psqlrc",
            "--tuples-only",
            "--no-align",
            "--set=ON_ERROR_STOP=1",
            f"--command={sql}",
        )
        return r.stdout.strip()

    def rows(self, sql: str, database: str = "factbank") -> list[dict[str, Any]]:
        """The rows of a query as JSON objects (json_agg inside Postgres)."""
        out = self.psql(f"SELECT coalesce(json_agg(q), '[]') FROM ({sql}) q", database)
        return json.loads(out)

    def admin(self, *argv: str) -> str:
        return self.exec("ingest", "factbank", "admin", *argv).stdout

    def issue_token(self, bank: str, member: str, scopes: str = "read,write") -> str:
        if bank not in self.admin("bank", "list"):
            kind = "personal" if bank.startswith("me") else "team"
            self.admin("bank", "create", bank, "--kind", kind)
        out = self.admin("token", "issue", bank, member, "--scopes", scopes, "--json")
        return json.loads(out)["token"]

    # --- the published ports ----------------------------------------------------------------

    @property
    def ingest_url(self) -> str:
        return f"http://{self.bind}:8701"

    @property
    def recall_url(self) -> str:
        return f"http://{self.bind}:8702"

    def http(self, token: str | None = None, timeout: float = 30) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(headers=headers, timeout=timeout, trust_env=False)


def fact(content: str, *, tags: list[str] | None = None, quote: str | None = None) -> dict:
    return {
        "content": content,
        "category": "environment",
        "source": {"kind": "user", "location": "compose-test"},
        "quote": quote or content,
        "tags": tags or [],
    }
