"""A service never waits without end for the database (principle: no request stalls a service):
the pool's acquire is bounded, and a write that committed is answered as committed even when
its bank version cannot be read afterwards."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from factbank.store import db, facts
from tests.integration.conftest import auth, fact_body, make_bank


async def test_an_exhausted_pool_times_out_instead_of_queueing_for_ever(dsn: str):
    pool = await db.create_pool(dsn, max_size=1, acquire_timeout=0.3)
    try:
        async with pool.acquire() as held:
            assert await held.fetchval("SELECT 1") == 1
            with pytest.raises(TimeoutError):
                async with pool.acquire():
                    pass
        # Released: the next caller gets it at once, and an explicit timeout still wins.
        async with pool.acquire(timeout=5) as conn:
            assert await conn.fetchval("SELECT 2") == 2
        assert pool.get_max_size() == 1  # everything else is asyncpg's own pool
    finally:
        await pool.close()


async def test_the_default_acquire_timeout_is_bounded(dsn: str):
    pool = await db.create_pool(dsn, max_size=1)
    try:
        assert 0 < pool.acquire_timeout <= 30
    finally:
        await pool.close()


async def test_a_committed_write_is_answered_201_when_its_version_cannot_be_read(
    stack, conn: asyncpg.Connection, monkeypatch
):
    bank = await make_bank(conn, "pools")

    async def unreadable(_conn, _bank_id):
        raise ConnectionResetError("the database went away after the commit")

    monkeypatch.setattr(facts, "bank_version", unreadable)
    r = await stack.ingest.post("/v1/facts", headers=auth(bank.rw), json=fact_body())
    assert r.status_code == 201, r.text
    assert "x-factbank-version" not in r.headers
    fact_id = r.json()["fact"]["id"]
    assert await conn.fetchval("SELECT count(*) FROM facts WHERE id = $1", fact_id) == 1
    monkeypatch.undo()
    r = await stack.ingest.post(
        "/v1/facts", headers=auth(bank.rw), json=fact_body("The worker listens on port 9090")
    )
    assert r.status_code == 201 and int(r.headers["x-factbank-version"]) >= 1


async def _lose(pool, dsn: str, use) -> BaseException:
    """Hold a pooled connection, have the server end its session (as a killed Postgres does),
    let the loop notice while the holder does no I/O (an import embedding on a worker thread),
    then use it: the exception the request would raise."""
    other = await asyncpg.connect(dsn)
    try:
        async with pool.acquire() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            await other.execute("SELECT pg_terminate_backend($1)", pid)
            await asyncio.sleep(0.5)
            try:
                await use(conn)
            except Exception as exc:  # the point: which exception, and how it is answered
                return exc
            raise AssertionError("a lost connection answered")
    finally:
        await other.close()
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    "use",
    [
        lambda c: c.execute("SELECT 1"),
        lambda c: c.fetch("SELECT 1"),
        lambda c: c.copy_records_to_table("facts", records=[]),
    ],
    ids=["execute", "fetch", "copy"],
)
async def test_a_pooled_connection_lost_under_a_request_is_answered_503(dsn: str, use):
    """Found by the compose drill (kill Postgres mid-import): 3 imports answered 500, because a
    lost pooled connection raises an InterfaceError ('released back to the pool') with no
    cause for the mapping table to find."""
    from factbank.runtime.web.errors import UNAVAILABLE, _answer

    pool = await db.create_pool(dsn, max_size=2)
    try:
        exc = await _lose(pool, dsn, use)
        assert _answer(exc) == (503, UNAVAILABLE), repr(exc)
        async with pool.acquire() as conn:  # the pool serves again with a new connection
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await pool.close()
