"""Running a real `factbank up` as a newcomer would (test_up.py, test_up_lifecycle.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.terminal import default_signals

VENV_BIN = str(Path(sys.executable).parent)
UP = [sys.executable, "-m", "factbank_client.cli.main", "up"]


def plain_env(**extra: str) -> dict[str, str]:
    """The environment of a newcomer after the Quick start: the venv is not on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "FACTBANK_LOG")}
    path = [d for d in env.get("PATH", "").split(os.pathsep)
            if d and Path(d).resolve() != Path(VENV_BIN).resolve()]
    env["PATH"] = os.pathsep.join(path or ["/usr/bin", "/bin"])
    env.update(extra)
    return env


def up_env(home, ingest: int, recall: int, **extra: str) -> dict[str, str]:
    return plain_env(FACTBANK_HOME=str(home), FACTBANK_INGEST_PORT=str(ingest),
                     FACTBANK_RECALL_PORT=str(recall), **extra)


def start(home, ingest: int, recall: int, **popen: Any) -> subprocess.Popen:
    popen.setdefault("preexec_fn", default_signals)  # tests/terminal.py says why
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.STDOUT)
    return subprocess.Popen(UP, env=up_env(home, ingest, recall), text=True, **popen)


def wait_ready(port: int, proc: subprocess.Popen | None = None, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"factbank up exited: {out}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("services did not become ready")


def postgres_running(home) -> bool:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return any(str(home) in line and "postgres" in line for line in out.splitlines())


def factbank(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "factbank_client.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
