"""The dense leg's SQL over its indexes (migration 0015): one partial half-precision HNSW
graph per language group, an exact float32 re-rank, an empty group not scanned, and the
upgrade of a database that already holds vectors.
"""

from __future__ import annotations

import json

import asyncpg
import numpy as np
import pytest
from pgvector.asyncpg import register_vector

from factbank.read import search as search_mod
from factbank.store import migrations

DIM = 384


@pytest.fixture
async def dsn_at_0014(pg_server):
    """A database migrated up to 0014 (one HNSW graph of every vector), ready to upgrade."""
    from tests.conftest import database_before

    async with database_before(pg_server, "factbank_mig_0015", 15) as dsn:
        yield dsn


async def _fill(c: asyncpg.Connection, bank_name: str, langs: list[str],
                rng: np.random.Generator) -> tuple[int, np.ndarray]:
    """A bank with one fact per entry of `langs`, each with a random own vector (ord 0)."""
    bank = await c.fetchval("INSERT INTO banks (name, kind) VALUES ($1, 'personal') "
                            "RETURNING id", bank_name)
    member = await c.fetchval("INSERT INTO members (bank_id, name) VALUES ($1, 'm') "
                              "RETURNING id", bank)
    await c.execute("INSERT INTO categories (bank_id, name) VALUES ($1, 'project') "
                    "ON CONFLICT DO NOTHING", bank)
    vectors = rng.normal(size=(len(langs), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i, (lang, v) in enumerate(zip(langs, vectors, strict=True)):
        fid = await c.fetchval(
            """INSERT INTO facts (bank_id, content, category, source_kind, quote, origin, trust,
                                  created_by_member, content_hash)
               VALUES ($1, $2, 'project', 'user', 'q', 'user', 0.9, $3, $4) RETURNING id""",
            bank, f"fact {bank_name} {i}", member, f"{bank_name}{i}".encode())
        await c.execute("INSERT INTO fact_vectors (fact_id, bank_id, ord, lang, embedding) "
                        "VALUES ($1, $2, 0, $3, $4)", fid, bank, lang, v)
    return bank, vectors


async def _dense(c: asyncpg.Connection, bank: int, q: np.ndarray, k: int) -> list:
    async with c.transaction(readonly=True):
        await c.execute(search_mod.dense_settings())
        # The product's settings leave the exact path through the bank's btree to a bank this
        # small: make the planner take the graphs, which is what is tested here.
        await c.execute("SET LOCAL enable_sort = off")
        rows = await c.fetch(search_mod._DENSE_SQL, bank, q, k, q, search_mod.DENSE_POOL, q)
        plan = await c.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + search_mod._DENSE_SQL,
                                bank, q, k, q, search_mod.DENSE_POOL, q)
    return rows, json.loads(plan)[0]["Plan"]


def _scans(plan: dict) -> dict[str, int]:
    """Index name -> how many times its scan ran (0: never executed), over the whole plan."""
    out: dict[str, int] = {}
    stack = [plan]
    while stack:
        node = stack.pop()
        if node.get("Index Name"):
            out[node["Index Name"]] = out.get(node["Index Name"], 0) + int(node["Actual Loops"])
        stack += node.get("Plans", [])
    return out


async def test_upgrade_keeps_vectors_and_the_dense_leg_reads_one_graph_per_group(dsn_at_0014):
    rng = np.random.default_rng(5)
    c = await asyncpg.connect(dsn_at_0014)
    await register_vector(c)
    try:
        langs = ["zh"] * 30 + ["en"] * 20 + ["mixed"] * 10
        bank, vectors = await _fill(c, "mixed-bank", langs, rng)
        only_en, _ = await _fill(c, "english-bank", ["en"] * 20, rng)
        before = await c.fetchval("SELECT count(*) FROM fact_vectors")
        done = await migrations.migrate(c)
        assert [m.version for m in done][:1] == [15]
        assert await c.fetchval("SELECT count(*) FROM fact_vectors") == before
        hnsw = {r["relname"]: r["pred"] for r in await c.fetch(
            "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) AS pred FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE a.amname = 'hnsw'")}
        assert set(hnsw) == {"fact_vectors_own", "fact_vectors_zh", "fact_vectors_rest"}
        assert "ord = 0" in hnsw["fact_vectors_own"]

        q = vectors[3] + 0.5 * vectors[40]
        q /= np.linalg.norm(q)
        rows, plan = await _dense(c, bank, q, 5)
        scans = _scans(plan)
        assert scans.get("fact_vectors_zh", 0) > 0 and scans.get("fact_vectors_rest", 0) > 0
        # Exactly the 5 nearest of each group, with float32 cosines (not half precision).
        cos = vectors @ q
        zh = np.array([lang == "zh" for lang in langs])
        fact_ids = await c.fetch("SELECT fact_id FROM fact_vectors WHERE bank_id = $1 "
                                 "ORDER BY fact_id", bank)
        ids = np.array([r["fact_id"] for r in fact_ids])
        want = set(ids[zh][np.argsort(-cos[zh])[:5]]) | set(ids[~zh][np.argsort(-cos[~zh])[:5]])
        assert {r["fact_id"] for r in rows} == want
        by_id = dict(zip(ids.tolist(), cos.tolist(), strict=True))
        assert max(abs(float(r["cosine"]) - by_id[r["fact_id"]]) for r in rows) < 1e-5

        # A bank with no Chinese vector: its Chinese graph is never walked.
        rows, plan = await _dense(c, only_en, q, 5)
        scans = _scans(plan)
        assert len(rows) == 5 and all(r["lang"] == "en" for r in rows)
        assert scans.get("fact_vectors_zh", 0) == 0
        assert scans.get("fact_vectors_rest", 0) > 0
    finally:
        await c.close()
