"""The hash-chained audit log: verify detects an edited, a deleted and a reordered row."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from factbank.store import audit
from tests.integration.conftest import auth, fact_body, tamper


async def _fill(stack, two_banks) -> None:
    alpha, beta = two_banks
    for i in range(4):
        r = await stack.ingest.post(
            "/v1/facts", json=fact_body(f"Host h{i} runs service s{i}"), headers=auth(alpha.rw)
        )
        assert r.status_code == 201
    fid = r.json()["fact"]["id"]
    await stack.ingest.post(f"/v1/facts/{fid}/confirm", json={}, headers=auth(alpha.rw))
    await stack.ingest.post("/v1/facts", json=fact_body("beta fact"), headers=auth(beta.rw))


async def _alpha_rows(conn):
    return await conn.fetch(
        "SELECT a.* FROM audit_log a JOIN banks b ON b.id = a.bank_id WHERE b.name = 'alpha' "
        "ORDER BY a.id"
    )


async def test_intact_chain_verifies(stack, two_banks, conn):
    await _fill(stack, two_banks)
    assert await audit.verify(conn) == []
    actions = [r["action"] for r in await _alpha_rows(conn)]
    assert actions.count("fact.stored") == 4 and "fact.confirm" in actions


async def test_edited_row_is_detected(stack, two_banks, conn):
    await _fill(stack, two_banks)
    victim = (await _alpha_rows(conn))[5]
    await tamper(conn, "UPDATE audit_log SET target = 'someone-else' WHERE id = $1", victim["id"])
    problems = await audit.verify(conn)
    assert [(p.audit_id, "edited" in p.what) for p in problems] == [(victim["id"], True)]


async def test_deleted_row_is_detected(stack, two_banks, conn):
    await _fill(stack, two_banks)
    rows = await _alpha_rows(conn)
    await tamper(conn, "DELETE FROM audit_log WHERE id = $1", rows[4]["id"])
    problems = await audit.verify(conn)
    assert [p.audit_id for p in problems] == [rows[5]["id"]]
    assert "removed" in problems[0].what


async def test_reordered_rows_are_detected(stack, two_banks, conn):
    await _fill(stack, two_banks)
    a, b = (await _alpha_rows(conn))[4:6]
    # swap the two rows' contents (and hashes), as if their order had been changed
    await tamper(
        conn,
        """
        UPDATE audit_log x SET action = y.action, target = y.target, detail = y.detail,
               at = y.at, member_id = y.member_id, token_id = y.token_id,
               prev_hash = y.prev_hash, hash = y.hash || '\\x00'::bytea
        FROM audit_log y WHERE (x.id, y.id) IN (($1, $2), ($2, $1))""",
        a["id"],
        b["id"],
    )
    await tamper(
        conn,
        "UPDATE audit_log SET hash = substring(hash from 1 for 32) WHERE id IN ($1, $2)",
        a["id"],
        b["id"],
    )
    problems = await audit.verify(conn)
    assert {p.audit_id for p in problems} >= {a["id"], b["id"]}


async def test_cli_verify_and_export(stack, two_banks, dsn, tmp_path):
    await _fill(stack, two_banks)
    env = {**os.environ, "DATABASE_URL": dsn}

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "factbank_client.cli.main", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    r = cli("admin", "audit", "verify")
    assert r.returncode == 0 and "audit chain ok" in r.stdout, r.stderr
    r = cli("admin", "audit", "verify", "--json")
    assert json.loads(r.stdout)["ok"] is True
    out = tmp_path / "audit.jsonl"
    r = cli("admin", "audit", "export", "--out", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    *records, head = records
    assert len(records) == json.loads(cli("admin", "audit", "verify", "--json").stdout)["rows"]
    assert all(len(rec["hash"]) == 64 for rec in records)
    assert "audit_head" in head
    r = cli("admin", "audit", "export", "--format", "csv", "--bank", "alpha")
    header = r.stdout.splitlines()[0]
    assert header.startswith("id,at,bank_id") and "fact.stored" in r.stdout
