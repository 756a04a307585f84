"""A service never waits without end for the database (principle: no request stalls a service):
the pool's acquire is bounded, and a write that committed is answered as committed even when
its bank version cannot be read afterwards."""

from __future__ import annotations

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
