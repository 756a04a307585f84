"""Recall from a read replica tolerates its lag: a writer sees its own write at once.

A real streaming replica needs a second cluster; here the "replica" is a copy of the database
taken before the last write (exactly what a lagging standby shows), and the test checks that
recall serves from it normally and falls back to the primary for a writer who has seen a newer
bank version (`X-Factbank-Version` from ingest -> `X-Factbank-Min-Version` to recall).
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit

import asyncpg
from litestar.testing import AsyncTestClient

from factbank_ingest import app as ingest_app
from factbank_recall import app as recall_app
from tests.conftest import with_database
from tests.integration.conftest import auth, fact_body, make_bank


async def test_writer_reads_its_write_through_a_lagging_replica(dsn, settings, pg_server):
    conn = await asyncpg.connect(dsn)
    alpha = await make_bank(conn, "alpha")
    await conn.close()
    async with AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as ingest:
        r = await ingest.post(
            "/v1/facts", json=fact_body("Grafana runs on port 3000"), headers=auth(alpha.rw)
        )
        assert int(r.headers["x-factbank-version"]) >= 1
    source = urlsplit(dsn).path.lstrip("/")
    name = source + "_replica"
    admin = await asyncpg.connect(pg_server)
    await admin.execute(f"CREATE DATABASE {name} TEMPLATE {source}")
    await admin.close()
    lagging = replace(settings, database_url_read=with_database(pg_server, name))
    try:
        async with AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as ingest:
            r = await ingest.post(
                "/v1/facts",
                headers=auth(alpha.rw),
                json=fact_body("Kibana runs on port 5601", tags=["kibana", "日志"]),
            )
            written = int(r.headers["x-factbank-version"])
        async with AsyncTestClient(app=recall_app.create(lagging, dsn=dsn)) as recall:
            q = {"query": "kibana port 5601"}
            stale = (await recall.post("/v1/search", json=q, headers=auth(alpha.ro))).json()
            assert "Kibana" not in str(stale["results"])  # served by the lagging replica
            fresh = (
                await recall.post(
                    "/v1/search",
                    json=q,
                    headers={**auth(alpha.ro), "X-Factbank-Min-Version": str(written)},
                )
            ).json()
            assert fresh["results"][0]["fact"]["content"] == "Kibana runs on port 5601"
    finally:
        admin = await asyncpg.connect(pg_server)
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
