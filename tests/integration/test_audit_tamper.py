"""tampering with the audit log by someone with database access is detected.

The three attacks of the outside review, as the table owner, each on a log written through
the HTTP services: TRUNCATE; deleting the newest row with triggers disabled (then more writes
on top); deleting a middle row and recomputing the chain with plain sha256 (also with
`keyed_from` raised to pass the re-hashed rows off as pre-key ones). Each must fail `audit
verify` (the store, the admin route and the CLI). And the rows written before the key stay
verifiable.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import asyncpg
import pytest

from factbank.settings import Settings
from factbank.store import audit, banks, migrations
from tests.conftest import with_database
from tests.integration.conftest import auth, fact_body, make_bank, tamper


async def _write(stack, token: str, n: int = 4) -> str:
    """n facts through ingest; returns the last answer's audit head header."""
    for i in range(n):
        r = await stack.ingest.post("/v1/facts", json=fact_body(f"Host q{i} runs queue {i}"),
                                    headers=auth(token))
        assert r.status_code == 201, r.text
    return r.headers["x-factbank-audit-head"]


def heads(stack) -> audit.Heads:
    return audit.Heads(stack.settings.audit_head_path)


async def problems(stack, conn, token: str) -> list[str]:
    """What verify finds, through the store and the admin route (they must agree: every row
    of these tests is in the one bank's chain)."""
    found = await audit.verify(conn, head=await heads(stack).entry(conn))
    r = await stack.ingest.get("/v1/admin/audit/verify", headers=auth(token))
    assert r.status_code == 200, r.text
    assert r.json()["ok"] is (not found), (r.json(), found)
    return [p.what for p in found]


async def test_writers_get_the_head_and_it_is_recorded_outside_the_database(stack, conn):
    bank = await make_bank(conn, "alpha")
    header = await _write(stack, bank.rw)
    tail = await conn.fetchrow(
        "SELECT id, hash FROM audit_log WHERE bank_id = (SELECT id FROM banks "
        "WHERE name = 'alpha') ORDER BY id DESC LIMIT 1")
    assert header == f"{tail['id']}:{bytes(tail['hash']).hex()}"
    entry = await heads(stack).entry(conn)
    assert entry["chains"][str(await conn.fetchval("SELECT id FROM banks"))]["id"] == tail["id"]
    assert await audit.verify(conn, head=entry) == []
    # The hashes are keyed: plain sha256 of the row does not give them.
    row = await conn.fetchrow("SELECT * FROM audit_log ORDER BY id DESC LIMIT 1")
    assert audit.chain_hash(bytes(row["prev_hash"]), row) == bytes(row["hash"])
    assert audit.chain_hash(bytes(row["prev_hash"]), row, keyed=False) != bytes(row["hash"])


async def test_truncate_is_refused_and_detected(stack, conn):
    bank = await make_bank(conn, "alpha")
    await _write(stack, bank.rw)
    with pytest.raises(asyncpg.RaiseError, match="append-only"):
        await conn.execute("TRUNCATE audit_log")
    await tamper(conn, "TRUNCATE audit_log", trigger="audit_log_no_truncate")
    assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0
    found = await problems(stack, conn, bank.admin)
    assert found and all("not in the log" in w for w in found), found


async def test_deleting_the_newest_row_is_detected_even_after_more_writes(stack, conn):
    bank = await make_bank(conn, "alpha")
    await _write(stack, bank.rw)
    newest = await conn.fetchval("SELECT max(id) FROM audit_log")
    await tamper(conn, "DELETE FROM audit_log WHERE id = $1", newest)
    assert any("not in the log" in w for w in await problems(stack, conn, bank.admin))
    # Writes on top chain cleanly onto the row before it: the head outside stays put, and the
    # writer that found the gap recorded it.
    await _write(stack, bank.rw, 2)
    found = await problems(stack, conn, bank.admin)
    assert any(f"row {newest}" in w and "not in the log" in w for w in found), found
    assert any("found by a writer" in w for w in found), found


@pytest.mark.parametrize("raise_keyed_from", [False, True])
async def test_a_middle_row_deleted_and_the_chain_recomputed_is_detected(
    stack, conn, raise_keyed_from
):
    bank = await make_bank(conn, "alpha")
    await _write(stack, bank.rw, 6)
    rows = await conn.fetch("SELECT * FROM audit_log ORDER BY id")
    victim = rows[len(rows) // 2]
    # The attacker's rewrite: drop the row, recompute sha256 over every later row of its chain.
    await tamper(conn, "DELETE FROM audit_log WHERE id = $1", victim["id"])
    prev = {}
    for row in await conn.fetch("SELECT * FROM audit_log ORDER BY id"):
        chain = row["bank_id"]
        p = prev.get(chain, audit.GENESIS)
        h = hashlib.sha256(p + audit._canonical(row)).digest()
        await tamper(conn, "UPDATE audit_log SET prev_hash = $2, hash = $3 WHERE id = $1",
                     row["id"], p, h)
        prev[chain] = h
    if raise_keyed_from:  # and pass the rewritten rows off as written before the key
        await conn.execute("ALTER TABLE audit_keyed DISABLE TRIGGER audit_keyed_no_update")
        await conn.execute("UPDATE audit_keyed SET keyed_from = 1000000000")
    found = await problems(stack, conn, bank.admin)
    assert found, "the recomputed chain verified"
    if raise_keyed_from:
        assert any("keyed_from" in w for w in found), found
    else:
        assert any("hash mismatch" in w for w in found), found


async def test_cli_verify_fails_on_a_deleted_newest_row(stack, conn, dsn):
    bank = await make_bank(conn, "alpha")
    await _write(stack, bank.rw)
    env = {**os.environ, "DATABASE_URL": dsn,
           "FACTBANK_AUDIT_HEAD": str(stack.settings.audit_head_path)}

    def verify() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "factbank_client.cli.main", "admin", "audit", "verify",
             "--json"], env=env, capture_output=True, text=True, timeout=120)

    r = verify()
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr
    await tamper(conn, "DELETE FROM audit_log WHERE id = (SELECT max(id) FROM audit_log)")
    r = verify()
    assert r.returncode == 1 and json.loads(r.stdout)["ok"] is False, r.stdout + r.stderr


@pytest.fixture
async def premigration_dsn(pg_server):
    name = f"factbank_audit_legacy_{os.getpid()}"
    admin = await asyncpg.connect(pg_server)
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    await admin.close()
    yield with_database(pg_server, name)
    admin = await asyncpg.connect(pg_server)
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.close()


async def test_rows_written_before_the_key_stay_verifiable(premigration_dsn, monkeypatch,
                                                           tmp_path):
    """A log written before migration 0011 (plain sha256) verifies after it, with keyed rows
    appended on top; the head file records where the keyed chain starts."""
    every = migrations.available()
    monkeypatch.setattr(migrations, "available", lambda: [m for m in every if m.version < 10])
    conn = await asyncpg.connect(premigration_dsn)
    try:
        await migrations.migrate(conn)
        prev = audit.GENESIS
        for i in range(3):
            row = audit._record(audit.OPERATOR, None, "legacy.action", f"t{i}", {"n": i})
            digest = audit.chain_hash(prev, row, keyed=False)
            await conn.execute(
                """INSERT INTO audit_log (at, bank_id, member_id, token_id, action, target,
                                          detail, prev_hash, hash)
                   VALUES ($1, NULL, NULL, NULL, $2, $3, $4::jsonb, $5, $6)""",
                row["at"], row["action"], row["target"], json.dumps(row["detail"]), prev, digest)
            prev = digest
        monkeypatch.setattr(migrations, "available", lambda: every)
        await migrations.migrate(conn)
        assert await audit.keyed_from(conn) == 4
        await banks.create_bank(conn, "after", "personal")
        head_file = audit.Heads(Settings(home=tmp_path).audit_head_path)
        await head_file.seal(conn)
        entry = await head_file.entry(conn)
        assert entry["keyed_from"] == 4
        assert await audit.verify(conn, head=entry) == []
    finally:
        await conn.close()


def test_the_key_file_is_generated_once_and_private(tmp_path):
    settings = Settings(home=tmp_path, audit_key="")
    key = audit.key_of(settings)
    assert len(key) == 32 and audit.key_of(settings) == key
    assert (tmp_path / "audit.key").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ValueError, match="FACTBANK_AUDIT_KEY"):
        audit.key_of(Settings(home=tmp_path, audit_key="short"))
