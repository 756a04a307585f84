"""The restore drill: fill a bank, back up with ops/backup, destroy the database, restore with
ops/restore into an empty one, and compare every fact, event and token, then verify the audit
chain. A second drill takes the backup while writers are running and checks the restored copy
is consistent (pg_dump reads one snapshot)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import msgspec
import pytest
from litestar.testing import AsyncTestClient

from factbank.models import NewFact
from factbank.runtime.embedded import bin_dir
from factbank.store import audit, banks, db
from factbank.text import embedder
from factbank.write import retain
from factbank.write.deps import Deps
from factbank_ingest import app as ingest_app
from tests.conftest import with_database
from tests.integration.conftest import auth, fact_body, make_bank

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

TABLES = {
    "facts": "SELECT id, bank_id, content, category, tags, source_kind, source_location, quote,"
    " project, origin, tentative, trust, status, superseded_by, supersede_reason,"
    " created_by_member, created_by_agent, created_at, content_hash, embedding_model,"
    " doc_len FROM facts ORDER BY id",
    "fact_vectors": "SELECT fact_id, ord, lang, embedding::text AS embedding FROM fact_vectors"
    " ORDER BY fact_id, ord",
    "fact_events": "SELECT * FROM fact_events ORDER BY id",
    "tokens": "SELECT * FROM tokens ORDER BY id",
    "members": "SELECT * FROM members ORDER BY id",
    "postings": "SELECT * FROM postings ORDER BY bank_id, term, fact_id",
    "audit_log": "SELECT * FROM audit_log ORDER BY id",
    "banks": "SELECT * FROM banks ORDER BY id",
}


def ops(script: str, *args: str, dsn: str, backup_dir: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "BACKUP_DIR": str(backup_dir),
        "PG_BIN": str(bin_dir()),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "ops" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def snapshot(dsn: str) -> dict[str, list[dict]]:
    conn = await asyncpg.connect(dsn)
    try:
        return {name: [dict(r) for r in await conn.fetch(sql)] for name, sql in TABLES.items()}
    finally:
        await conn.close()


async def _fill(dsn: str, settings) -> tuple[str, str]:
    conn = await asyncpg.connect(dsn)
    alpha = await make_bank(conn, "alpha")
    team = await make_bank(conn, "crew", "team")
    info, _ = await banks.issue_token(conn, "crew", "bob", "read")
    await banks.revoke_token(conn, info.id)
    await conn.close()
    async with AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as ingest:
        ids = []
        for i, text in enumerate(
            [
                "API 监听 8080 端口",
                "Use pnpm, never npm",
                "E0502 means two borrows overlap",
                "CI runs on runner-7",
            ]
        ):
            r = await ingest.post(
                "/v1/facts",
                json=fact_body(text, tags=[f"t{i}", "标签"]),
                headers=auth(alpha.rw if i % 2 else team.rw),
            )
            ids.append((r.json()["fact"]["id"], alpha.rw if i % 2 else team.rw))
        await ingest.post(
            f"/v1/facts/{ids[1][0]}/confirm", json={"reason": "ok"}, headers=auth(ids[1][1])
        )
        await ingest.post(
            f"/v1/facts/{ids[3][0]}/dispute", json={"reason": "no"}, headers=auth(ids[3][1])
        )
        await ingest.post(
            "/v1/facts/supersede",
            headers=auth(team.rw),
            json={
                "fact": fact_body("API 监听 8081 端口"),
                "replaces": [ids[0][0]],
                "reason": "moved",
            },
        )
    return alpha.ro, team.ro


async def _recreate_empty(pg_server: str, name: str) -> str:
    admin = await asyncpg.connect(pg_server)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # destroy
        await admin.execute(f"CREATE DATABASE {name}")  # empty, not from the template
    finally:
        await admin.close()
    return with_database(pg_server, name)


async def test_backup_destroy_restore_compare(dsn, settings, pg_server, tmp_path):
    alpha_ro, _ = await _fill(dsn, settings)
    before = await snapshot(dsn)
    r = ops("backup", dsn=dsn, backup_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    dumps = list(tmp_path.glob("factbank-*.dump"))
    assert len(dumps) == 1 and dumps[0].stat().st_size > 0
    name = urlsplit(dsn).path.lstrip("/")
    restored = await _recreate_empty(pg_server, name)
    r = ops("restore", str(dumps[0]), dsn=restored, backup_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    after = await snapshot(restored)
    for table in TABLES:
        assert after[table] == before[table], table
    conn = await asyncpg.connect(restored)
    try:
        assert await audit.verify(conn) == []
        assert await banks.authenticate(conn, alpha_ro) is not None  # tokens still work
        # restoring over live data is refused
    finally:
        await conn.close()
    r = ops("restore", str(dumps[0]), dsn=restored, backup_dir=tmp_path)
    assert r.returncode == 4


async def test_backup_during_concurrent_writes_restores_consistently(
    dsn, settings, pg_server, tmp_path
):
    await _fill(dsn, settings)
    conn = await asyncpg.connect(dsn)
    writer = await make_bank(conn, "busy")
    await conn.close()
    stop = asyncio.Event()
    written = 0
    # Writers go through the core directly on a real asyncpg pool (truly concurrent with the
    # backup, which runs pg_dump in a thread).
    pool = await db.create_pool(dsn)
    conn = await asyncpg.connect(dsn)
    principal = await banks.authenticate(conn, writer.rw)
    await conn.close()
    deps = Deps(pool, settings, embedder.load(settings.embedder).embedder)

    async def write_loop() -> None:
        nonlocal written
        while not stop.is_set():
            item = msgspec.convert(
                fact_body(f"Worker w{written} listens on port {9000 + written}"), NewFact
            )
            await retain.add(deps, principal, item)
            written += 1

    async def until(enough: int, seconds: float = 120.0) -> None:
        """Wait for the writers by count, not by the clock: a busy machine (or the first
        write's model and scanner load) must not leave the backup without writers around it."""
        for _ in range(int(seconds / 0.05)):
            if written >= enough:
                return
            await asyncio.sleep(0.05)

    try:
        tasks = [asyncio.create_task(write_loop()) for _ in range(2)]
        await until(2)
        r = await asyncio.to_thread(ops, "backup", dsn=dsn, backup_dir=tmp_path)
        await until(written + 2)
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await pool.close()
    assert r.returncode == 0, r.stderr
    assert written > 3
    restored = await _recreate_empty(pg_server, urlsplit(dsn).path.lstrip("/") + "_r")
    dump = next(tmp_path.glob("factbank-*.dump"))
    r = ops("restore", str(dump), dsn=restored, backup_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    conn = await asyncpg.connect(restored)
    try:
        assert await audit.verify(conn) == []
        # every fact has its creation event, and the index statistics match the postings
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM facts f WHERE NOT EXISTS (SELECT 1 FROM fact_events e "
                "WHERE e.fact_id = f.id AND e.kind = 'created')"
            )
            == 0
        )
        rows = await conn.fetch(
            "SELECT b.doc_count, b.total_len, (SELECT count(*) FROM facts f WHERE "
            "f.bank_id = b.id AND f.indexed) AS indexed, (SELECT coalesce(sum(doc_len), 0) "
            "FROM facts f WHERE f.bank_id = b.id AND f.indexed) AS lens FROM banks b"
        )
        for row in rows:
            assert row["doc_count"] == row["indexed"] and row["total_len"] == row["lens"]
        restored_facts = await conn.fetchval(
            "SELECT count(*) FROM facts f JOIN banks b ON b.id = f.bank_id WHERE b.name = 'busy'"
        )
        assert 0 < restored_facts <= written
    finally:
        await conn.close()
        admin = await asyncpg.connect(pg_server)
        await admin.execute(
            f"DROP DATABASE IF EXISTS {urlsplit(restored).path.lstrip('/')} WITH (FORCE)"
        )
        await admin.close()
