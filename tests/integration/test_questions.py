"""Writer questions (docs/principles.md#the-writer-asks-the-questions): stored with the
fact, embedded as extra vectors,
indexed by BM25, and kept consistent through edit, reinforce, supersede, delete, purge,
import and export, on the real database."""

from __future__ import annotations

import json

from tests.integration.conftest import auth, fact_body

PORT_FACT = fact_body(
    "ledgerline's Redis runs on port 6380 in staging",
    quote="redis: 6380",
    tags=["redis", "cache"],
    questions=[
        "Which cache port does the billing service use?",
        "账单服务的缓存开在哪个端口？",
    ],
)


async def add(stack, token, body, status=201):
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(token))
    assert r.status_code == status, r.text
    return r.json()


async def vectors(conn, fact_id):
    return [
        (r["ord"], r["lang"])
        for r in await conn.fetch(
            "SELECT ord, lang FROM fact_vectors WHERE fact_id = $1 ORDER BY ord", fact_id
        )
    ]


async def search(stack, token, query, **extra):
    r = await stack.recall.post(
        "/v1/search", json={"query": query, "floor": False, **extra}, headers=auth(token)
    )
    assert r.status_code == 200, r.text
    return r.json()["results"]


async def test_questions_are_stored_embedded_and_indexed(stack, two_banks, conn):
    alpha, _ = two_banks
    out = await add(stack, alpha.rw, PORT_FACT)
    fact = out["fact"]
    assert fact["questions"] == PORT_FACT["questions"]
    # one vector for the fact itself (ord 0) and one per question, each in its own language
    assert await vectors(conn, fact["id"]) == [(0, "en"), (1, "en"), (2, "zh")]
    terms = {
        r["term"]
        for r in await conn.fetch("SELECT term FROM postings WHERE fact_id = $1", fact["id"])
    }
    assert "端口" in terms  # from the Chinese question: BM25 indexes questions too


async def test_a_query_worded_like_a_question_matches_through_it(stack, two_banks):
    alpha, _ = two_banks
    fid = (await add(stack, alpha.rw, PORT_FACT))["fact"]["id"]
    await add(stack, alpha.rw, fact_body("The CI runners are on host ci-02", quote="ci-02"))
    hits = await search(stack, alpha.ro, "账单服务的缓存开在哪个端口")
    assert hits[0]["fact"]["id"] == fid
    assert hits[0]["match"] == "question: 账单服务的缓存开在哪个端口？"


async def test_questions_are_bounded_with_a_4xx_naming_the_field(stack, two_banks, conn):
    alpha, _ = two_banks
    r = await stack.ingest.post(
        "/v1/facts", json={**PORT_FACT, "questions": [f"q{i}?" for i in range(7)]},
        headers=auth(alpha.rw),
    )
    assert r.status_code == 422 and r.json()["reasons"][0]["field"] == "questions", r.text
    r = await stack.ingest.post(
        "/v1/facts", json={**PORT_FACT, "questions": ["ok?", "x" * 201]}, headers=auth(alpha.rw)
    )
    assert r.status_code == 422 and r.json()["reasons"][0]["field"] == "questions[1]", r.text
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_secrets_in_questions_are_redacted(stack, two_banks, conn):
    alpha, _ = two_banks
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    out = await add(stack, alpha.rw, {**PORT_FACT, "questions": [f"Is the token {secret}?"]})
    assert secret not in json.dumps(out)
    stored = await conn.fetchval("SELECT questions FROM facts WHERE id = $1", out["fact"]["id"])
    assert secret not in " ".join(stored)


async def test_patch_replaces_questions_and_their_vectors(stack, two_banks, conn):
    alpha, _ = two_banks
    fid = (await add(stack, alpha.rw, fact_body()))["fact"]["id"]
    assert await vectors(conn, fid) == [(0, "en")]
    r = await stack.ingest.patch(
        f"/v1/facts/{fid}",
        json={"questions": ["What port is the API on?", "接口监听哪个端口？", "API port?"]},
        headers=auth(alpha.rw),
    )
    assert r.status_code == 200, r.text
    assert r.json()["questions"][1] == "接口监听哪个端口？"
    assert await vectors(conn, fid) == [(0, "en"), (1, "en"), (2, "zh"), (3, "en")]
    hits = await search(stack, alpha.ro, "接口监听哪个端口")
    assert hits and hits[0]["fact"]["id"] == fid
    # tags alone keep the questions; an empty list removes them
    r = await stack.ingest.patch(f"/v1/facts/{fid}", json={"tags": ["x"]}, headers=auth(alpha.rw))
    assert len(r.json()["questions"]) == 3 and len(await vectors(conn, fid)) == 4
    r = await stack.ingest.patch(f"/v1/facts/{fid}", json={"questions": []}, headers=auth(alpha.rw))
    assert r.json()["questions"] == [] and await vectors(conn, fid) == [(0, "en")]
    # a PATCH of a foreign bank's fact is a 404 and changes nothing
    _, beta = two_banks
    r = await stack.ingest.patch(
        f"/v1/facts/{fid}", json={"questions": ["x?"]}, headers=auth(beta.rw)
    )
    assert r.status_code == 404


async def test_a_repeat_adds_its_new_questions_to_the_fact(stack, two_banks, conn):
    alpha, _ = two_banks
    fid = (await add(stack, alpha.rw, PORT_FACT))["fact"]["id"]
    again = {**PORT_FACT, "questions": [PORT_FACT["questions"][0], "Redis port for billing?"]}
    out = await add(stack, alpha.rw, again)
    assert out["status"] == "reinforced" and out["fact"]["id"] == fid
    assert out["fact"]["questions"] == [*PORT_FACT["questions"], "Redis port for billing?"]
    assert [o for o, _ in await vectors(conn, fid)] == [0, 1, 2, 3]


async def test_delete_and_purge_remove_vectors_and_cached_embeddings(stack, two_banks, conn):
    alpha, _ = two_banks
    fid = (await add(stack, alpha.rw, PORT_FACT))["fact"]["id"]
    r = await stack.ingest.delete(f"/v1/facts/{fid}?reason=wrong", headers=auth(alpha.rw))
    assert r.status_code == 200 and await vectors(conn, fid) == []
    assert await search(stack, alpha.ro, "账单服务的缓存开在哪个端口") == []
    r = await stack.ingest.delete(f"/v1/facts/{fid}/purge", headers=auth(alpha.admin))
    assert r.status_code == 200, r.text
    assert r.json()["cache_rows_removed"] == 3  # the fact's own text and both questions
    assert await conn.fetchval("SELECT count(*) FROM embedding_cache") == 0


async def test_supersede_and_export_carry_questions(stack, two_banks, conn):
    alpha, _ = two_banks
    old = (await add(stack, alpha.rw, PORT_FACT))["fact"]["id"]
    new_body = {**PORT_FACT, "content": "ledgerline's Redis runs on port 6381 in staging"}
    r = await stack.ingest.post(
        "/v1/facts/supersede",
        json={"fact": new_body, "replaces": [old], "reason": "moved"},
        headers=auth(alpha.rw),
    )
    assert r.status_code == 201, r.text
    new = r.json()["fact"]["id"]
    # the old fact keeps its vectors: a query that matches its question returns the successor
    hits = await search(stack, alpha.ro, "Which cache port does the billing service use?")
    assert hits[0]["fact"]["id"] == new
    r = await stack.recall.get("/v1/export", headers=auth(alpha.ro))
    exported = [json.loads(line) for line in r.text.splitlines()]
    assert all(e["questions"] == PORT_FACT["questions"] for e in exported)


async def test_import_embeds_questions_in_one_transaction(stack, two_banks, conn):
    alpha, _ = two_banks
    lines = [
        json.dumps(PORT_FACT),
        json.dumps({**fact_body("Staging DB is db-3", quote="db-3"), "questions": ["DB host?"]}),
    ]
    r = await stack.ingest.post(
        "/v1/facts/import", content="\n".join(lines).encode(), headers=auth(alpha.rw)
    )
    assert r.status_code == 201, r.text
    assert await conn.fetchval("SELECT count(*) FROM fact_vectors") == 5
    bad = [*lines, json.dumps({**fact_body("x y z"), "questions": ["q?"] * 2 + ["y" * 300]})]
    before = await conn.fetchval("SELECT count(*) FROM fact_vectors")
    r = await stack.ingest.post(
        "/v1/facts/import", content="\n".join(bad).encode(), headers=auth(alpha.rw)
    )
    assert r.status_code == 422, r.text
    assert await conn.fetchval("SELECT count(*) FROM fact_vectors") == before


async def test_a_prompt_block_keeps_only_hits_near_the_best(stack, two_banks):
    """Injection takes the hits within PROMPT_MARGIN of the best one: a fact that matches the
    prompt through its own question is injected alone, while search still lists the other
    on-topic facts that clear the gate."""
    alpha, _ = two_banks
    api = (await add(stack, alpha.rw, fact_body(
        "The staging API listens on port 8443", quote="listen: 8443",
        questions=["Which port does the staging API listen on?", "预发环境的 API 是哪个端口？"],
    )))["fact"]["id"]
    for content in ("The staging API runs behind nginx", "The staging API logs go to Loki"):
        await add(stack, alpha.rw, fact_body(content, quote=content))
    prompt = "Which port does the staging API listen on?"
    r = await stack.recall.post(
        "/v1/inject", json={"kind": "prompt", "session_id": "s1", "prompt": prompt},
        headers=auth(alpha.ro),
    )
    assert r.status_code == 200, r.text
    assert r.json()["facts"] == [api]
    hits = await search(stack, alpha.ro, prompt)
    assert len(hits) == 3 and hits[0]["fact"]["id"] == api
