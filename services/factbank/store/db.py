"""Connection pools. Every pool registers the pgvector codec so vectors travel as numpy arrays."""

from __future__ import annotations

import asyncpg
from pgvector.asyncpg import register_vector

from factbank.store.migrations import require_current


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def connect(dsn: str) -> asyncpg.Connection:
    """A single plain connection (migrations, admin); no codec, the extension may not exist yet."""
    return await asyncpg.connect(dsn)


async def create_pool(dsn: str, *, max_size: int = 10, check_schema: bool = True) -> asyncpg.Pool:
    """A pool for a service. Refuses a schema that is behind, with the command to run."""
    if check_schema:
        conn = await asyncpg.connect(dsn)
        try:
            await require_current(conn)
        finally:
            await conn.close()
    pool = await asyncpg.create_pool(
        dsn, min_size=1, max_size=max_size, init=_init_connection, command_timeout=30
    )
    assert pool is not None
    return pool
