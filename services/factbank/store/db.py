"""Connection pools. Every pool registers the pgvector codec so vectors travel as numpy arrays.

A service's pool waits at most `ACQUIRE_TIMEOUT` seconds for a free connection: asyncpg's
`acquire()` waits forever by default, so with every connection held (a slow statement per
connection, or a replica that stopped answering) each new request would queue without end
and never be answered. After the timeout the request gets the TimeoutError that the web
layer answers with 503 (runtime/web/errors.py's table), and the caller can retry.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from factbank.store.migrations import require_current


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def connect(dsn: str) -> asyncpg.Connection:
    """A single plain connection (migrations, admin); no codec, the extension may not exist yet."""
    return await asyncpg.connect(dsn)


# Statements are bounded at 30 s (command_timeout); waiting for a connection gets a third of it.
ACQUIRE_TIMEOUT = 10.0


class Pool(asyncpg.Pool):
    """asyncpg's pool, whose `acquire()` is bounded by default. A subclass, not a wrapper: the
    handlers take it as `asyncpg.Pool` through litestar's dependency injection, which checks
    the type."""

    __slots__ = ("acquire_timeout",)

    def acquire(self, *, timeout: float | None = None) -> Any:
        return super().acquire(timeout=self.acquire_timeout if timeout is None else timeout)


async def create_pool(
    dsn: str,
    *,
    max_size: int = 10,
    check_schema: bool = True,
    acquire_timeout: float = ACQUIRE_TIMEOUT,
) -> Pool:
    """A pool for a service (`Pool`: acquire bounded by `acquire_timeout`). Refuses a schema
    that is behind, with the command to run."""
    if check_schema:
        conn = await asyncpg.connect(dsn)
        try:
            await require_current(conn)
        finally:
            await conn.close()
    # The arguments asyncpg.create_pool passes, with its defaults.
    pool = Pool(
        dsn,
        min_size=1,
        max_size=max_size,
        max_queries=50000,
        max_inactive_connection_lifetime=300.0,
        init=_init_connection,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        command_timeout=30,
    )
    pool.acquire_timeout = acquire_timeout
    await pool
    return pool
