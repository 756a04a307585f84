"""One rule for bytes that are not UTF-8, and UTF-8 where HTTP gives latin-1.

An import line with invalid UTF-8 was silently stored with U+FFFD while the same bytes to
`/v1/facts` got a 400: now every body (JSON or JSONL) that is not UTF-8 is a 400 naming the
line (or the body) and the byte, and nothing is stored. A UTF-8 `X-Factbank-Agent` header was
stored as mojibake (the ASGI view decodes headers as latin-1): now it is decoded as UTF-8, and
a header that is not UTF-8 is a 400 naming it.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.conftest import auth, fact_body

BAD = b"\xff\xfe"  # never UTF-8


def _line(content: str) -> bytes:
    return json.dumps(fact_body(content), ensure_ascii=False).encode()


@pytest.mark.parametrize("where", ["content", "quote"])
async def test_invalid_utf8_is_a_400_naming_the_line_on_every_write(stack, two_banks, conn,
                                                                     where):
    alpha, _ = two_banks
    good = _line("The API listens on port 8080")
    bad = json.dumps(fact_body("Backups run at 02:00", quote="QQQ")).encode()
    bad = bad.replace(b"Backups" if where == "content" else b"QQQ", b"Back" + BAD + b"ups")
    before = await conn.fetchval("SELECT count(*) FROM facts")
    r = await stack.ingest.post("/v1/facts/import", content=good + b"\n" + bad + b"\n",
                                headers={**auth(alpha.rw), "Content-Type": "application/x-ndjson"})
    assert r.status_code == 400, r.text
    assert "line 2" in r.json()["detail"] and "UTF-8" in r.json()["detail"]
    r = await stack.ingest.post("/v1/facts", content=bad,
                                headers={**auth(alpha.rw), "Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert "UTF-8" in r.json()["detail"] and "body" in r.json()["detail"]
    assert await conn.fetchval("SELECT count(*) FROM facts") == before
    assert await conn.fetchval("SELECT count(*) FROM facts WHERE content LIKE '%' || "
                               "chr(65533) || '%' OR quote LIKE '%' || chr(65533) || '%'") == 0


async def test_a_utf8_agent_header_is_stored_as_written(stack, two_banks, conn):
    alpha, _ = two_banks
    agent = "小明的 claude-code ✓"
    r = await stack.ingest.post("/v1/facts", json=fact_body("The cache lives in Redis db 2"),
                                headers={**auth(alpha.rw), "X-Factbank-Agent": agent.encode()})
    assert r.status_code == 201, r.text
    assert r.json()["fact"]["created_by"]["agent"] == agent
    stored = await conn.fetchval("SELECT created_by_agent FROM facts WHERE id = $1",
                                 r.json()["fact"]["id"])
    assert stored == agent


async def test_an_agent_header_that_is_not_utf8_is_a_400_naming_it(stack, two_banks):
    """Through httpx's own ASGI transport: litestar's test client re-encodes header values
    it could not decode as UTF-8, so it cannot send these bytes."""
    alpha, _ = two_banks
    transport = httpx.ASGITransport(app=stack.ingest.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as raw:
        r = await raw.post("/v1/facts", json=fact_body("x is y"),
                           headers={**auth(alpha.rw), "X-Factbank-Agent": b"cl" + BAD})
    assert r.status_code == 400 and "X-Factbank-Agent" in r.json()["detail"], r.text
