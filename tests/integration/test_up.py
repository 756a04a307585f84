"""`factbank up` for real: embedded Postgres, both services, first-run token, restart, Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from factbank.runtime.runner import free_port
from tests.integration.uphelp import plain_env, postgres_running, start, wait_ready

pytestmark = pytest.mark.slow


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


def test_up_first_run_restart_and_ctrl_c():
    # Not tmp_path: pytest prunes old base dirs, which other pytest runs may do meanwhile.
    home = Path(tempfile.mkdtemp(prefix="factbank-up-")) / "home"
    ingest, recall = free_port(), free_port()
    proc = start(home, ingest, recall)
    try:
        wait_ready(ingest, proc)
        wait_ready(recall, proc)
    except BaseException:
        proc.kill()
        raise
    fact = {"content": "The team uses pnpm, never npm", "category": "preferences",
            "source": {"kind": "user"}, "quote": "we use pnpm, never npm", "origin": "user"}
    out = _stop_after(proc, ingest, fact)
    tokens = re.findall(r"fb_[A-Za-z0-9_-]{20,}", out)
    assert tokens, out
    assert "factbank login" in out and "factbank install" in out
    assert not postgres_running(home), "Ctrl-C must stop the embedded Postgres"

    proc = start(home, ingest, recall)
    try:
        wait_ready(recall, proc)
        r = httpx.get(f"http://127.0.0.1:{recall}/v1/facts",
                      headers={"Authorization": f"Bearer {tokens[0]}"})
        assert r.status_code == 200
        assert [f["content"] for f in r.json()["facts"]] == [fact["content"]]
    finally:
        out = _stop(proc)
    assert not re.findall(r"fb_[A-Za-z0-9_-]{20,}", out), "the token is printed only once"
    assert not postgres_running(home)


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


def _read_banner(proc: subprocess.Popen) -> str:
    lines = []
    while True:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("up exited before its banner: " + "".join(lines))
        lines.append(line)
        if "Ctrl-C stops" in line:
            return "".join(lines)


def test_up_banner_after_ready_printed_command_runs_and_a_second_up_refuses(tmp_path):
    """What a newcomer meets first: the banner comes once both services answer /readyz,
    last, with how to issue a new token; its `Next:` commands run as printed from a shell whose
    PATH lacks the venv (the Quick start never adds it); a second `up` says one is running."""
    home = Path(tempfile.mkdtemp(prefix="factbank-up-")) / "home"
    ingest, recall = free_port(), free_port()
    proc = start(home, ingest, recall)
    try:
        out = _read_banner(proc)
        # Printed only once both answer (the old banner came before the servers started).
        for port in (ingest, recall):
            assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        banner = out[out.index("created personal bank"):]
        assert "starting the ingest and recall services" in out[:out.index("created personal")]
        assert "admin token issue" in banner, "say how to issue a new token"
        token = re.findall(r"fb_[A-Za-z0-9_-]{20,}", banner)[0]
        login = next(ln.strip() for ln in banner.splitlines()
                     if ln.strip().split(" ")[1:2] == ["login"] or " login --url " in ln)
        assert login.split()[0] != "factbank", "factbank is not on this PATH: print a path"
        # Run the printed command exactly as a user pastes it, in a shell without the venv.
        shell_env = plain_env(FACTBANK_CONFIG=str(tmp_path / "cfg" / "config.toml"))
        done = subprocess.run(["bash", "-c", login], env=shell_env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, (login, done.stdout, done.stderr)
        assert "accept it" in done.stdout, done.stdout
        assert "command not found" not in done.stderr
        assert token in (tmp_path / "cfg" / "config.toml").read_text("utf-8")
        # The same printed path runs the rest of the CLI too.
        fb = login.split(" login ")[0]
        done = subprocess.run(["bash", "-c", f"{fb} search pnpm"], env=shell_env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (done.stdout, done.stderr)

        second = subprocess.run(
            [sys.executable, "-m", "factbank_client.cli.main", "up"],
            env=plain_env(FACTBANK_HOME=str(home), FACTBANK_INGEST_PORT=str(ingest),
                           FACTBANK_RECALL_PORT=str(recall)),
            capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, (second.stdout, second.stderr)
        assert "already running" in second.stderr
        assert "address already in use" not in (second.stdout + second.stderr).lower()
        assert "Ctrl-C stops" not in second.stdout
    except BaseException:
        proc.kill()
        proc.communicate(timeout=30)
        raise
    _stop(proc)
    assert not postgres_running(home)
