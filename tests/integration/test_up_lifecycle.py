"""every way `factbank up`'s terminal can end stops its embedded Postgres, checked
by pid; a killed `up` leaves nothing `status` does not name and `down` cannot stop; the next
`up` takes over a left-over cluster and stops it at its own exit.

Each test runs a real `factbank up` process and sends it real signals (or closes its real
pseudo-terminal, or kills its parent). One FACTBANK_HOME for the module: initdb runs once.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil
import pytest

from factbank.runtime.runner import free_port
from tests.integration.uphelp import UP, factbank, start, up_env, wait_ready
from tests.terminal import default_signals

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home():
    # Not tmp_path: pytest prunes old base dirs, which other pytest runs may do meanwhile.
    return Path(tempfile.mkdtemp(prefix="factbank-life-")) / "home"


@pytest.fixture
def ports():
    return free_port(), free_port()


def _state(home: Path) -> dict:
    return json.loads((home / "up.json").read_text())


def _pids(home: Path) -> tuple[int, int]:
    """(up's pid, its Postgres's pid), as up recorded them."""
    state = _state(home)
    return state["pid"], state["postgres_pid"]


def _gone(pid: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def _handles(home: Path) -> list[int]:
    path = home / "pgdata" / ".handle_pids.json"
    return json.loads(path.read_text()) if path.exists() else []


def _nothing_left(home: Path, *pids: int) -> None:
    for pid in pids:
        assert _gone(pid), f"pid {pid} is still running"
    assert _handles(home) == [], "a dead pid stayed in the handle list"
    assert not (home / "up.json").exists()


def _ready(home, ingest, recall, proc) -> tuple[int, int]:
    try:
        wait_ready(ingest, proc)
        wait_ready(recall, proc)
    except BaseException:
        proc.kill()
        raise
    up_pid, pg_pid = _pids(home)
    assert up_pid == proc.pid and psutil.pid_exists(pg_pid)
    return up_pid, pg_pid


def _pty_up(home, ingest, recall) -> tuple[subprocess.Popen, int]:
    """`up` as the session leader of a new pseudo-terminal, as in a terminal window."""
    master, slave = pty.openpty()

    def controlling_tty() -> None:
        default_signals()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(UP, env=up_env(home, ingest, recall), stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True, preexec_fn=controlling_tty)
    os.close(slave)
    return proc, master


def _drain(master: int, until: float) -> None:
    """Read the terminal (a full pty would block `up`'s writes)."""
    import select

    while time.monotonic() < until:
        if select.select([master], [], [], 0.2)[0]:
            try:
                os.read(master, 65536)
            except OSError:
                return


def test_closing_the_terminal_stops_postgres(home, ports):
    """The report: SIGHUP from a closed window left Postgres running. Here the window is a real
    pty whose master is closed: the kernel hangs up `up`, and writes to it fail with EIO."""
    ingest, recall = ports
    proc, master = _pty_up(home, ingest, recall)
    try:
        deadline = time.monotonic() + 120
        while not (home / "up.json").exists() or "postgres_pid" not in _state(home):
            _drain(master, time.monotonic() + 0.5)
            assert proc.poll() is None and time.monotonic() < deadline
        up_pid, pg_pid = _pids(home)
        while True:
            _drain(master, time.monotonic() + 0.5)
            try:
                wait_ready(recall, proc, timeout=0.5)
                break
            except AssertionError:
                assert time.monotonic() < deadline
    except BaseException:
        proc.kill()
        raise
    os.close(master)  # the terminal window closes
    proc.wait(timeout=60)
    _nothing_left(home, up_pid, pg_pid)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGQUIT, signal.SIGINT])
def test_each_stop_signal_stops_postgres(home, ports, sig):
    ingest, recall = ports
    proc = start(home, ingest, recall)
    up_pid, pg_pid = _ready(home, ingest, recall, proc)
    # The banner comes once `up` itself has seen both services ready, a moment after they
    # answer here: read the terminal until it is there, then signal (else the signal can
    # win that race and the banner is rightly never printed).
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")),
                              daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any("both ready" in line for line in lines) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    out = "".join(lines)
    assert proc.returncode == 0, out
    assert f"stopped embedded PostgreSQL (pid {pg_pid})" in out
    _nothing_left(home, up_pid, pg_pid)
    # B5: the terminal had the banner and no log lines; the requests are in the log file.
    log = home / "logs" / "factbank.log"
    assert f"Log (requests, startup; problems are shown here too): {log}" in out
    assert not [line for line in out.splitlines() if line.lstrip().startswith("{")], out
    assert '"route": "/readyz"' in log.read_text()


def test_a_killed_parent_stops_up_and_postgres(home, ports, tmp_path):
    """The terminal emulator (here: the parent) is killed with SIGKILL: no hangup is sent to
    `up`, which is re-parented; it notices and stops."""
    ingest, recall = ports
    out = tmp_path / "up.out"
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; "
         f"p = subprocess.Popen({UP!r}, stdout=open({str(out)!r}, 'w'), "
         "stderr=subprocess.STDOUT); p.wait()"],
        env=up_env(home, ingest, recall), preexec_fn=default_signals)
    try:
        wait_ready(recall, None)
        up_pid, pg_pid = _pids(home)
        assert psutil.Process(up_pid).ppid() == parent.pid
    except BaseException:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        raise
    parent.kill()
    parent.wait()
    _nothing_left(home, up_pid, pg_pid)
    assert "stopped embedded PostgreSQL" in out.read_text()


def test_kill_9_then_status_down_and_the_next_up_takes_over(home, ports):
    """What no handler can catch: `up` killed with SIGKILL. `status` names the Postgres it left
    (exit 1); the next `up` takes it over and its Ctrl-C really stops it (the report: "stopped"
    printed while it kept running); `down` stops a left-over one, verified by pid."""
    ingest, recall = ports
    env = up_env(home, ingest, recall)
    proc = start(home, ingest, recall)
    up_pid, pg_pid = _ready(home, ingest, recall, proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone(up_pid) and psutil.pid_exists(pg_pid), "SIGKILL leaves Postgres behind"
    status = factbank("status", "--json", env=env)
    assert status.returncode == 1, status.stdout
    report = json.loads(status.stdout)
    assert report["postgres"]["pid"] == pg_pid and report["postgres"]["orphaned"]
    assert report["up"]["running"] is False and report["problems"]

    proc = start(home, ingest, recall)
    up2, pg2 = _ready(home, ingest, recall, proc)
    assert pg2 == pg_pid, "the left-over cluster is reused"
    assert _handles(home) == [up2], "the dead pid left the handle list"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert "took over the PostgreSQL" in out and f"pid {pg_pid}" in out
    _nothing_left(home, up2, pg_pid)

    proc = start(home, ingest, recall)
    up3, pg3 = _ready(home, ingest, recall, proc)
    proc.kill()
    proc.communicate(timeout=30)
    down = factbank("down", "--json", env=env)
    assert down.returncode == 0, down.stdout + down.stderr
    assert json.loads(down.stdout)["stopped"] == [{"what": "PostgreSQL", "pid": pg3}]
    _nothing_left(home, up3, pg3)
    assert factbank("status", env=env).returncode == 3


def test_down_from_another_terminal(home, ports):
    ingest, recall = ports
    env = up_env(home, ingest, recall)
    proc = start(home, ingest, recall)
    up_pid, pg_pid = _ready(home, ingest, recall, proc)
    # A second `up` on other ports but the same FACTBANK_HOME would share the cluster.
    second = factbank("up", env=up_env(home, free_port(), free_port()), timeout=60)
    assert second.returncode == 2 and "already running for FACTBANK_HOME" in second.stderr
    status = factbank("status", env=env)
    assert status.returncode == 0, status.stdout
    assert f"pid {up_pid}" in status.stdout and f"pid {pg_pid}" in status.stdout
    assert "ready (database ok)" in status.stdout
    down = factbank("down", env=env)
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"stopped factbank up (pid {up_pid})" in down.stdout
    assert f"stopped PostgreSQL (pid {pg_pid})" in down.stdout
    assert proc.wait(timeout=30) == 0
    _nothing_left(home, up_pid, pg_pid)
    again = factbank("down", env=env)
    assert again.returncode == 0 and "not running" in again.stdout


def test_nohup_keeps_running_when_the_parent_goes(home, ports, tmp_path):
    """`nohup factbank up &` is meant to outlive its terminal: no hangup handler, no parent
    watch. `down` is how it ends."""
    ingest, recall = ports
    env = up_env(home, ingest, recall)
    parent = subprocess.Popen(
        ["bash", "-c", f"nohup {' '.join(UP)} > {tmp_path / 'out'} 2>&1 & echo $!; wait"],
        env=env, stdout=subprocess.PIPE, text=True, preexec_fn=default_signals)
    up_pid = int(parent.stdout.readline())
    try:
        wait_ready(recall, None)
        parent.kill()
        parent.wait()
        time.sleep(2)
        assert psutil.pid_exists(up_pid), "nohup'ed up stopped with its parent"
        _, pg_pid = _pids(home)
    finally:
        down = factbank("down", env=env)
    assert down.returncode == 0, down.stdout + down.stderr
    _nothing_left(home, up_pid, pg_pid)
