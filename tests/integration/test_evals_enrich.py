"""Smoke runs of the two evals of the review-queue work: evals/enrich.py (bare, then enriched
through GET /v1/enrich + PATCH) and evals/inject_tokens.py (the prompt block without and with
the "matched" notes). They check the machinery measures what it claims, not the figures."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from factbank_evals import agent_memory as am
from factbank_evals import enrich, inject_tokens
from factbank_evals.stack import running_stack

pytestmark = pytest.mark.slow


def _run(dsn: str) -> tuple[dict, dict]:
    with running_stack(database_url=dsn) as stack, httpx.Client(
        headers=stack.headers(), timeout=300
    ) as http:
        result = enrich.evaluate(http, stack, per_kind=1, small_bank=True)
        _, cases = am.load_set()
        tokens = inject_tokens.measure(http, stack, am.subset(cases, 1))
    return result, tokens


async def test_enrich_and_inject_token_evals_smoke(dsn: str) -> None:
    result, tokens = await asyncio.to_thread(_run, dsn)
    facts, cases = am.load_set(config="bare")
    chosen = am.subset(cases, 1)
    loaded = am.needed_facts(facts, chosen)
    current = [f for f in loaded if not any(g.get("supersedes") == f["id"] for g in loaded)]
    # Every current fact was handed out and written once per step (a repeat merged on import
    # counts once); none is left.
    assert result["written_questions"] == result["written_tags"]
    assert 0 < result["written_tags"] <= len(current)
    assert result["left_bare"] == 0 and result["queries"] == len(chosen)
    for step in enrich.STEPS:
        s = result["steps"][step]["hybrid+floor"]
        assert s["queries"] == len(chosen) and 0.0 <= s["r@5"] <= 1.0
    assert "| +tags |" in enrich.table(result)

    # The same hits rendered twice: the notes only add, the block stays in its budget, and
    # the service's block is the "after" one (up to the bank's name in the header).
    a = tokens["all"]
    assert a["after"]["mean"] >= a["before"]["mean"]
    assert a["after"]["max"] <= tokens["budget"] and a["service"]["max"] <= tokens["budget"]
    assert abs(a["service"]["mean"] - a["after"]["mean"]) <= 5
    assert tokens["prompts_with_a_block"] > 0 and tokens["notes"].get("none", 0) == 0
    assert sum(tokens["notes"].values()) >= tokens["prompts_with_a_block"]
