"""Bad input gets a clear 4xx naming the problem, never a 500, and writes nothing."""

from __future__ import annotations

import pytest

from tests.integration.conftest import auth, fact_body

CASES = [
    ("malformed json", b'{"content": "x",', None),
    ("not an object", b"[1, 2, 3]", None),
    ("wrong type", None, fact_body(content=42)),
    ("wrong nested type", None, fact_body(source={"kind": "file", "location": 7})),
    ("bad enum", None, fact_body(origin="guessed")),
    ("bad source kind", None, fact_body(source={"kind": "rumour"})),
    ("unknown field", None, {**fact_body(), "confidence": 0.9}),
    ("unknown nested field", None, fact_body(source={"kind": "file", "line": 3})),
    ("missing field", None, {k: v for k, v in fact_body().items() if k != "quote"}),
    ("tags not a list", None, fact_body(tags="a,b")),
]


@pytest.mark.parametrize(("name", "raw", "body"), CASES, ids=[c[0] for c in CASES])
async def test_bad_body_is_a_clear_4xx(stack, two_banks, conn, name, raw, body):
    alpha, _ = two_banks
    headers = {**auth(alpha.rw), "Content-Type": "application/json"}
    if raw is not None:
        r = await stack.ingest.post("/v1/facts", content=raw, headers=headers)
    else:
        r = await stack.ingest.post("/v1/facts", json=body, headers=headers)
    assert 400 <= r.status_code < 500, (name, r.status_code, r.text)
    detail = r.json()["detail"]
    assert detail and "internal" not in detail.lower()
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (fact_body(content=42), "content"),
        ({**fact_body(), "confidence": 0.9}, "confidence"),
        (fact_body(origin="guessed"), "origin"),
        ({k: v for k, v in fact_body().items() if k != "quote"}, "quote"),
    ],
)
async def test_message_names_the_field(stack, two_banks, body, field):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(alpha.rw))
    assert field in r.json()["detail"], r.text


async def test_oversized_body_is_413(stack, two_banks, conn):
    alpha, _ = two_banks
    big = fact_body(quote="x" * (stack.settings.max_body_bytes + 10))
    r = await stack.ingest.post("/v1/facts", json=big, headers=auth(alpha.rw))
    assert r.status_code == 413
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_bad_path_and_query_params(stack, two_banks):
    alpha, _ = two_banks
    r = await stack.ingest.get("/v1/facts/not-a-number", headers=auth(alpha.ro))
    assert r.status_code in (400, 404)
    r = await stack.recall.get("/v1/facts?limit=0", headers=auth(alpha.ro))
    assert r.status_code == 400 and "limit" in r.json()["detail"]
    r = await stack.recall.get("/v1/facts?after=abc", headers=auth(alpha.ro))
    assert r.status_code == 400 and "after" in r.json()["detail"]
