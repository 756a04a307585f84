"""Migrations: ordered, recorded, idempotent, safe from two processes, and enforced."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from factbank.store import db, migrations
from tests.conftest import with_database


@pytest.fixture
async def empty_dsn(pg_server):
    name = "factbank_empty_mig"
    admin = await asyncpg.connect(pg_server)
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    await admin.close()
    yield with_database(pg_server, name)
    admin = await asyncpg.connect(pg_server)
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.close()


def test_files_are_numbered_in_order():
    found = migrations.available()
    assert found and found[0].version == 1
    assert [m.version for m in found] == sorted(m.version for m in found)


async def test_two_processes_at_once_apply_each_once(empty_dsn):
    c1, c2 = await asyncpg.connect(empty_dsn), await asyncpg.connect(empty_dsn)
    try:
        done1, done2 = await asyncio.gather(migrations.migrate(c1), migrations.migrate(c2))
        total = len(migrations.available())
        assert sorted([len(done1), len(done2)]) == [0, total]
        assert await c1.fetchval("SELECT count(*) FROM schema_migrations") == total
        assert await migrations.migrate(c1) == []  # running again is a no-op
    finally:
        await c1.close()
        await c2.close()


async def test_services_refuse_a_schema_that_is_behind(empty_dsn):
    with pytest.raises(migrations.SchemaError, match="factbank migrate"):
        await db.create_pool(empty_dsn)


async def test_edited_migration_is_refused(empty_dsn):
    conn = await asyncpg.connect(empty_dsn)
    try:
        await migrations.migrate(conn)
        await conn.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
        with pytest.raises(migrations.SchemaError, match="edited"):
            await migrations.pending(conn)
    finally:
        await conn.close()


async def test_failed_migration_leaves_nothing(empty_dsn, monkeypatch):
    good = migrations.available()
    bad = migrations.Migration(999, "0999_bad.sql", "CREATE TABLE half (x int); SELECT 1/0;")
    monkeypatch.setattr(migrations, "available", lambda: [*good, bad])
    conn = await asyncpg.connect(empty_dsn)
    try:
        with pytest.raises(asyncpg.DivisionByZeroError):
            await migrations.migrate(conn)
        assert await conn.fetchval("SELECT to_regclass('half')") is None
        assert await conn.fetchval("SELECT max(version) FROM schema_migrations") == good[-1].version
    finally:
        await conn.close()


async def test_every_foreign_key_has_an_index(conn):
    """A delete checks the rows that reference it; without an index under the referencing
    column every check scans that table (a 100k-fact bank took over ten minutes to delete)."""
    missing = await conn.fetch(
        """SELECT c.conrelid::regclass::text AS tbl, a.attname AS col
           FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
           WHERE c.contype = 'f' AND NOT EXISTS (
               SELECT 1 FROM pg_index i
               WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])"""
    )
    assert [(r["tbl"], r["col"]) for r in missing] == []
