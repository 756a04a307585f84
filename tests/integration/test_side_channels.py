"""Item 5: nothing one bank's token can read says what another bank holds or asks.

(a) purge's `cache_rows_removed` is the same whether or not another bank holds the same text;
(b) `/metrics` (process-wide counters) answers only the operator's metrics token, never a bank
    token, whatever its scopes;
(c) the query-embedding cache is keyed per bank, and `/v1/stats` shows only this bank's cache
    figures: bank B asking a question changes nothing bank A can see."""

from __future__ import annotations

import httpx

from factbank.runtime.web.auth import METRICS_TOKEN_ENV
from tests.integration.conftest import auth, fact_body


async def _purge_count(stack, owner, other, content: str, shared: bool) -> int:
    body = fact_body(content, questions=[f"What about {content.split()[1]}?"])
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(owner.rw))
    assert r.status_code == 201, r.text
    fid = r.json()["fact"]["id"]
    if shared:
        r = await stack.ingest.post("/v1/facts", json=body, headers=auth(other.rw))
        assert r.status_code == 201, r.text
    r = await stack.ingest.delete(f"/v1/facts/{fid}/purge", headers=auth(owner.admin))
    assert r.status_code == 200, r.text
    return r.json()["cache_rows_removed"]


async def test_purge_count_does_not_depend_on_another_bank(stack, two_banks, conn):
    alpha, beta = two_banks
    alone = await _purge_count(stack, alpha, beta, "Service kestrel runs on port 7001", False)
    shared = await _purge_count(stack, alpha, beta, "Service osprey runs on port 7002", True)
    assert alone == shared == 2  # the fact's own text and its one question, both times
    # Beta's fact still holds its own vectors and is still found.
    r = await stack.recall.post("/v1/search", json={"query": "osprey port"},
                                headers=auth(beta.ro))
    assert [h["fact"]["content"] for h in r.json()["results"]][:1] == [
        "Service osprey runs on port 7002"
    ]


async def test_metrics_answer_only_the_operator_token(stack, two_banks, monkeypatch):
    alpha, beta = two_banks
    await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(beta.rw))
    await stack.recall.post("/v1/search", json={"query": "port"}, headers=auth(beta.ro))
    for client in (stack.ingest, stack.recall):
        # No metrics token configured: nobody reads them.
        monkeypatch.delenv(METRICS_TOKEN_ENV, raising=False)
        assert (await client.get("/metrics", headers=auth(alpha.admin))).status_code == 401
        monkeypatch.setenv(METRICS_TOKEN_ENV, "metrics-" + "k" * 32)
        assert (await client.get("/metrics")).status_code == 401
        for bank in (alpha, beta):
            for token in (bank.ro, bank.rw, bank.admin):
                r = await client.get("/metrics", headers=auth(token))
                assert r.status_code == 401, r.text
                assert "factbank_" not in r.text
        r = await client.get("/metrics", headers=auth("metrics-" + "k" * 31))
        assert r.status_code == 401
        r = await client.get("/metrics", headers=auth("metrics-" + "k" * 32))
        assert r.status_code == 200, r.text
        assert "factbank_requests_total" in r.text


async def _stats(stack, token: str) -> dict:
    r = await stack.recall.get("/v1/stats", headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()["cache"]


async def _search(stack, token: str, query: str, limit: int = 5) -> None:
    r = await stack.recall.post("/v1/search", json={"query": query, "limit": limit},
                                headers=auth(token))
    assert r.status_code == 200, r.text


async def test_query_embedding_cache_and_stats_are_per_bank(stack, two_banks, conn):
    alpha, beta = two_banks
    for bank in (alpha, beta):
        r = await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(bank.rw))
        assert r.status_code == 201, r.text
    question = "which port does the payments API listen on"
    before = await _stats(stack, alpha.ro)
    # Bank B asks, twice (another limit: past the result cache, onto the query embedding).
    await _search(stack, beta.ro, question)
    await _search(stack, beta.ro, question, limit=3)
    beta_stats = await _stats(stack, beta.ro)
    assert beta_stats["query_embedding"]["misses"] == 1
    assert beta_stats["query_embedding"]["hits"] == 1  # the cache works within a bank
    # Bank A sees nothing of it in its stats...
    assert await _stats(stack, alpha.ro) == before
    # ...and asking the same question is a miss for A: B's cached embedding is not A's.
    await _search(stack, alpha.ro, question)
    after = await _stats(stack, alpha.ro)
    assert after["query_embedding"] == {"hits": 0, "misses": 1, "errors": 0, "hit_rate": 0.0}
    assert after["result"]["hits"] == 0
    # Cache keys name the bank.
    keys = list(stack.recall.app.state.service.recall.cache.memory._data)
    qe = [k for k in keys if k.startswith("fb:qe:")]
    ids = {str(await conn.fetchval("SELECT id FROM banks WHERE name = $1", b.name))
           for b in (alpha, beta)}
    assert {k.split(":")[2] for k in qe} == ids


# --- MCP over HTTP (item 8a): a caller without a valid token learns no internal address. ------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _mcp_answer(recall_url: str, token: str | None) -> httpx.Response:
    from factbank_client import config as client_config
    from factbank_client import mcp_server

    cfg = client_config.ClientConfig(url="http://127.0.0.1:1", recall_url=recall_url)
    app = mcp_server.http_app(cfg)
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://mcp") as client:
        return await client.post("/mcp", json=body, headers=headers)


async def test_mcp_http_shows_no_recall_url_to_a_caller_without_a_valid_token(caplog):
    port = _free_port()  # nothing listens: the token check cannot reach recall
    internal = f"http://127.0.0.1:{port}"
    for token in (None, "fb_wrong", "not-a-token"):
        r = await _mcp_answer(internal, token)
        assert r.status_code in (401, 502), r.text
        for leak in (str(port), "127.0.0.1", "ConnectError", "Connection refused"):
            assert leak not in r.text and leak not in str(r.headers), (token, r.text)
    # The operator still finds out where it failed, in the MCP server's own log.
    assert any(str(port) in rec.getMessage() for rec in caplog.records)


async def test_mcp_http_passes_on_no_recall_error_detail(monkeypatch):
    """A 5xx (with whatever detail) from recall during the token check is a bare 502."""

    async def broken(self, url, **kw):
        return httpx.Response(500, json={"detail": "pool at 10.0.0.7:5432 exhausted"})

    monkeypatch.setattr(httpx.AsyncClient, "get", broken)
    r = await _mcp_answer("http://recall.internal:8702", "fb_any")
    assert r.status_code == 502 and "10.0.0.7" not in r.text and "recall.internal" not in r.text
