"""Symbol sources on the server (`src/net.py::RetryPolicy.backoff`): stored with the symbol's
fingerprint and returned; a bad symbol source or a fingerprint naming another symbol is a 4xx
naming the field, through add, verify and confirm; a verify moves a symbol fact to another
file. Against the real services and Postgres."""

from __future__ import annotations

import pytest

from tests.integration.conftest import auth, fact_body
from tests.integration.staleness_api import PROJECT, add, fingerprint, history, sha, verify

LOCATION = "src/net.py::RetryPolicy.backoff"
QUOTE = "return self.base * 2 ** attempt"


def symbol_fp(path: str = "src/net.py", name: str = "RetryPolicy.backoff", **over) -> dict:
    fp = fingerprint(path, 40, QUOTE, lines=4, symbol=name, symbol_sha256=sha(name + "body"))
    fp.update(over)
    return fp


def symbol_fact(location: str = LOCATION, fp: dict | None = None, **over) -> dict:
    body = fact_body("backoff doubles the delay on every attempt",
                     source={"kind": "file", "location": location}, quote=QUOTE,
                     project=PROJECT, fingerprint=symbol_fp() if fp is None else fp)
    body.update(over)
    return body


async def test_a_symbol_source_is_stored_with_its_fingerprint(stack, two_banks):
    alpha, _ = two_banks
    out = await add(stack, alpha.rw, symbol_fact())
    fact = out["fact"]
    assert fact["source"] == {"kind": "file", "location": LOCATION}
    assert fact["fingerprint"]["symbol"] == "RetryPolicy.backoff"
    assert fact["fingerprint"]["symbol_sha256"] == sha("RetryPolicy.backoffbody")
    got = (await history(stack, alpha.ro, fact["id"]))["fact"]
    assert got["fingerprint"] == fact["fingerprint"]
    # A line-anchored fingerprint reads as before: no symbol keys at all.
    plain = await add(stack, alpha.rw, fact_body(
        "port", source={"kind": "file", "location": "deploy/api.yaml:12"}, quote="port: 8080",
        fingerprint=fingerprint()))
    assert "symbol" not in plain["fact"]["fingerprint"]


@pytest.mark.parametrize(("location", "fp", "field", "words"), [
    ("src/net.rb::RetryPolicy.backoff", None, "source.location", "symbol anchors are for"),
    ("src/net.py::", None, "source.location", "path::Qualified.name"),
    ("src/net.py::Retry Policy", None, "source.location", "not a qualified name"),
    ("src/net.py::a:b", None, "source.location", "not a qualified name"),
    (LOCATION, symbol_fp(name="RetryPolicy.total"), "fingerprint.symbol",
     "the source names 'RetryPolicy.backoff'"),
    (LOCATION, fingerprint("src/net.py", 40, QUOTE), "fingerprint.symbol",
     "names its symbol"),
    ("src/net.py:40", symbol_fp(), "fingerprint.symbol", "only for a symbol source"),
    (LOCATION, {k: v for k, v in symbol_fp().items() if k != "symbol_sha256"},
     "fingerprint.symbol_sha256", "digest"),
    (LOCATION, symbol_fp(symbol_sha256="xyz"), "symbol_sha256", ""),
    (LOCATION, symbol_fp(symbol="R" * 301), "symbol", ""),
])
async def test_a_bad_symbol_source_is_a_4xx_naming_the_field(stack, two_banks, conn, location,
                                                             fp, field, words):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/facts", json=symbol_fact(location, fp),
                                headers=auth(alpha.rw))
    assert 400 <= r.status_code < 500, r.text
    assert field in r.text and words in r.text, r.text
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_verify_moves_a_symbol_fact_and_refuses_a_mismatched_one(stack, two_banks):
    alpha, _ = two_banks
    fact = (await add(stack, alpha.rw, symbol_fact()))["fact"]
    refused = await verify(stack, alpha.rw, [
        {"id": fact["id"], "verdict": "moved", "location": "src/retry.py::RetryPolicy.backoff",
         "fingerprint": symbol_fp("src/retry.py", "Retrier.backoff")}], status=422)
    assert "results[0].fingerprint.symbol" in str(refused)
    refused = await verify(stack, alpha.rw, [
        {"id": fact["id"], "verdict": "moved", "location": "src/retry.sh::RetryPolicy.backoff",
         "fingerprint": symbol_fp("src/retry.sh")}], status=422)
    assert "results[0].location" in str(refused) and "symbol anchors are for" in str(refused)
    out = await verify(stack, alpha.rw, [
        {"id": fact["id"], "verdict": "moved", "location": "src/retry.py::Retrier.backoff",
         "fingerprint": symbol_fp("src/retry.py", "Retrier.backoff"),
         "reason": "RetryPolicy.backoff moved from src/net.py to src/retry.py as "
                   "Retrier.backoff"}])
    assert out["moved"] == 1
    h = await history(stack, alpha.ro, fact["id"])
    assert h["fact"]["source"]["location"] == "src/retry.py::Retrier.backoff"
    assert h["fact"]["fingerprint"]["symbol"] == "Retrier.backoff"
    assert h["events"][-1]["kind"] == "relocated"
    assert h["events"][-1]["reason"].startswith(f"{LOCATION} -> src/retry.py::Retrier.backoff")


async def test_a_confirm_re_anchors_a_stale_symbol_fact(stack, two_banks):
    alpha, _ = two_banks
    fact = (await add(stack, alpha.rw, symbol_fact()))["fact"]
    await verify(stack, alpha.rw, [{"id": fact["id"], "verdict": "stale",
                                    "reason": "RetryPolicy.backoff: its body changed",
                                    "context": "40: def backoff(self, attempt):"}])
    bad = await stack.ingest.post(f"/v1/facts/{fact['id']}/confirm", json={
        "reason": "still doubles", "quote": QUOTE,
        "fingerprint": symbol_fp(name="Other.name")}, headers=auth(alpha.rw))
    assert bad.status_code == 422 and "fingerprint.symbol" in bad.text, bad.text
    ok = await stack.ingest.post(f"/v1/facts/{fact['id']}/confirm", json={
        "reason": "still doubles", "quote": QUOTE,
        "fingerprint": symbol_fp(symbol_sha256=sha("new body"))}, headers=auth(alpha.rw))
    assert ok.status_code in (200, 201), ok.text
    got = (await history(stack, alpha.ro, fact["id"]))["fact"]
    assert got["status"] == "active" and got["fingerprint"]["symbol_sha256"] == sha("new body")
