"""Every per-request step runs once: walk one fact through ingest and one query through
recall, count the steps that used to repeat, and check the one vector store (migration 0014).

- redaction: the write gate (the fact, its project and agent, the X-Factbank-Agent header in
  one pass) and the store's two doors (`facts.record_event`, `audit.append`), nothing else;
- the content hash: once, in the gate;
- recall: the language of each candidate fact is the one stored with its vector, never
  detected again (only the query's is);
- a fact's own vector is stored once (fact_vectors ord 0), behind one HNSW index.
"""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest

from factbank.read import search as search_mod
from factbank.redact import redaction
from factbank.store import facts as facts_mod
from factbank.store import migrations
from tests.integration.conftest import auth, fact_body, make_bank


def counting(monkeypatch, module, name: str) -> list[int]:
    """Count calls of module.name (patched at the module, where callers look it up)."""
    calls = [0]
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


async def test_one_add_redacts_at_the_gate_and_the_two_store_doors(stack, conn, monkeypatch):
    bank = await make_bank(conn, "alpha")
    headers = {**auth(bank.rw), "X-Factbank-Agent": "codex"}
    # The first add loads and warms the redaction engine; count the second one.
    r = await stack.ingest.post("/v1/facts", json=fact_body("Redis runs on cache-1:6379"),
                                headers=headers)
    assert r.status_code == 201, r.text
    passes = counting(monkeypatch, redaction, "redact_fields")
    texts = counting(monkeypatch, redaction, "redact_text")
    hashes = counting(monkeypatch, facts_mod, "content_hash")
    body = fact_body(project="github.com/acme/api", agent="claude-code")
    r = await stack.ingest.post("/v1/facts", json=body, headers=headers)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "stored"
    # gate (redact_fields) + record_event (redact_fields) + audit.append (clean_value: one
    # redact_text over the joined strings). It was 5: the header and clean_facts besides.
    assert passes[0] + texts[0] == 3, (passes[0], texts[0])
    assert hashes[0] == 1


async def test_the_gate_cleans_the_header_agent_and_project(stack, conn):
    bank = await make_bank(conn, "alpha")
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    r = await stack.ingest.post(
        "/v1/facts", json=fact_body(project=f"acme {secret}"),
        headers={**auth(bank.rw), "X-Factbank-Agent": f"bot {secret}"},
    )
    assert r.status_code == 201, r.text
    assert secret not in r.text
    row = await conn.fetchrow("SELECT project, created_by_agent FROM facts")
    assert secret not in row["project"] and secret not in row["created_by_agent"]
    assert "REDACTED" in row["created_by_agent"]
    assert {"field": "project", "kind": "github_token"} in r.json()["redacted"] or any(
        f["field"] == "project" for f in r.json()["redacted"])


async def test_one_query_detects_only_its_own_language(stack, conn, monkeypatch):
    bank = await make_bank(conn, "alpha")
    contents = ["The API listens on port 8080", "API 服务监听 8443 端口",
                "Deploys of the API go through runner-7", "API 的日志在 /var/log/api 下"]
    for c in contents:
        r = await stack.ingest.post("/v1/facts", json=fact_body(c, quote=c),
                                    headers=auth(bank.rw))
        assert r.status_code == 201, r.text
    calls = counting(monkeypatch, search_mod, "language")
    r = await stack.recall.post("/v1/search", json={"query": "API port", "floor": False},
                                headers=auth(bank.ro))
    assert r.status_code == 200, r.text
    assert len(r.json()["results"]) >= 2
    assert calls[0] == 1  # the query's; every fact's came with its vector


async def test_a_facts_own_vector_is_stored_once_behind_one_index(stack, conn):
    bank = await make_bank(conn, "alpha")
    r = await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(bank.rw))
    fact_id = r.json()["fact"]["id"]
    columns = {r["column_name"] for r in await conn.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'facts'")}
    assert "embedding" not in columns
    assert await conn.fetchval(
        "SELECT count(*) FROM fact_vectors WHERE fact_id = $1 AND ord = 0", fact_id) == 1
    hnsw = await conn.fetch(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'hnsw'")
    # One graph of own vectors (ord 0) for the near-duplicate checks, one per language group
    # for recall (migration 0015); the vector itself is stored once.
    assert sorted(r["relname"] for r in hnsw) == [
        "fact_vectors_own", "fact_vectors_rest", "fact_vectors_zh"]
    # The near-duplicate check reads that one vector: a repeat in other words reinforces.
    r = await stack.ingest.post("/v1/facts", json=fact_body("the API listens on port 8080."),
                                headers=auth(bank.rw))
    assert r.json()["status"] == "reinforced", r.text


@pytest.fixture
async def dsn_at_0011(pg_server):
    from tests.conftest import database_before

    async with database_before(pg_server, "factbank_mig_0012", 12) as dsn:
        yield dsn


async def test_migration_0012_keeps_every_own_vector_in_fact_vectors(dsn_at_0011):
    c = await asyncpg.connect(dsn_at_0011)
    try:
        bank = await c.fetchval("INSERT INTO banks (name, kind) VALUES ('a', 'personal') "
                                "RETURNING id")
        member = await c.fetchval("INSERT INTO members (bank_id, name) VALUES ($1, 'm') "
                                  "RETURNING id", bank)
        await c.execute("INSERT INTO categories (bank_id, name) VALUES ($1, 'project')", bank)
        vec = "[" + ",".join(["0.05"] * 384) + "]"
        ids = []
        for content, status in (("only in facts 部署", "active"), ("both", "active"),
                                ("gone", "deleted")):
            ids.append(await c.fetchval(
                """INSERT INTO facts (bank_id, content, category, source_kind, quote, origin,
                                      trust, created_by_member, content_hash, embedding, status)
                   VALUES ($1, $2, 'project', 'user', 'q', 'user', 0.9, $3, '\\x00', $4::vector,
                           $5) RETURNING id""", bank, content, member, vec, status))
        await c.execute("INSERT INTO fact_vectors (fact_id, bank_id, ord, lang, embedding) "
                        "VALUES ($1, $2, 0, 'en', $3::vector)", ids[1], bank, vec)
        done = await migrations.migrate(c)
        assert [m.version for m in done] == [m.version for m in migrations.available()
                                             if m.version >= 12]
        rows = await c.fetch("SELECT fact_id, ord, lang, embedding::text AS e FROM fact_vectors "
                             "ORDER BY fact_id")
        assert [(r["fact_id"], r["ord"]) for r in rows] == [(ids[0], 0), (ids[1], 0)]
        assert rows[0]["lang"] == "mixed"  # "only in facts 部署": as migration 0004 judged it
        got = np.array([float(x) for x in rows[0]["e"].strip("[]").split(",")])
        assert np.allclose(got, 0.05)
        assert await c.fetchval(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'facts' AND column_name = 'embedding'") == 0
        assert await c.fetchval("SELECT to_regclass('facts_embedding')") is None
    finally:
        await c.close()
