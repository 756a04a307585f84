"""`factbank up` for real: embedded Postgres, both services, first-run token, restart, Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from factbank.runner import free_port

pytestmark = pytest.mark.slow


def _start(home, ingest: int, recall: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(FACTBANK_HOME=str(home), FACTBANK_INGEST_PORT=str(ingest),
               FACTBANK_RECALL_PORT=str(recall))
    return subprocess.Popen(
        [sys.executable, "-m", "factbank_client.cli.main", "up"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _wait_ready(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"factbank up exited: {proc.stdout.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("services did not become ready")


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


def _postgres_running(home) -> bool:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return any(str(home) in line and "postgres" in line for line in out.splitlines())


def test_up_first_run_restart_and_ctrl_c():
    # Not tmp_path: pytest prunes old base dirs, which other pytest runs may do meanwhile.
    home = Path(tempfile.mkdtemp(prefix="factbank-up-")) / "home"
    ingest, recall = free_port(), free_port()
    proc = _start(home, ingest, recall)
    try:
        _wait_ready(ingest, proc)
        _wait_ready(recall, proc)
    except BaseException:
        proc.kill()
        raise
    fact = {"content": "The team uses pnpm, never npm", "category": "preferences",
            "source": {"kind": "user"}, "quote": "we use pnpm, never npm", "origin": "user"}
    out = _stop_after(proc, ingest, fact)
    tokens = re.findall(r"fb_[A-Za-z0-9_-]{20,}", out)
    assert tokens, out
    assert "factbank login" in out and "factbank install" in out
    assert not _postgres_running(home), "Ctrl-C must stop the embedded Postgres"

    proc = _start(home, ingest, recall)
    try:
        _wait_ready(recall, proc)
        r = httpx.get(f"http://127.0.0.1:{recall}/v1/facts",
                      headers={"Authorization": f"Bearer {tokens[0]}"})
        assert r.status_code == 200
        assert [f["content"] for f in r.json()["facts"]] == [fact["content"]]
    finally:
        out = _stop(proc)
    assert not re.findall(r"fb_[A-Za-z0-9_-]{20,}", out), "the token is printed only once"
    assert not _postgres_running(home)


def _stop_after(proc, ingest_port, fact) -> str:
    try:
        # The token is in the output so far; read it from the process without stopping it.
        out_lines = []
        while True:
            line = proc.stdout.readline()
            out_lines.append(line)
            if "Ctrl-C stops" in line or not line:
                break
        token = re.findall(r"fb_[A-Za-z0-9_-]{20,}", "".join(out_lines))[0]
        r = httpx.post(f"http://127.0.0.1:{ingest_port}/v1/facts", json=fact,
                       headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201, r.text
    finally:
        rest = _stop(proc)
    return "".join(out_lines) + rest
