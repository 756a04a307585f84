"""A tiny smoke of the load drill (evals/load_drill.py) against the compose stack: a few
agents for a few seconds, no 5xx, no lost write. The drill itself (20+ agents, minutes,
embedded vs compose) runs by hand: python -m factbank_evals.load_drill."""

from __future__ import annotations

from factbank_evals import load_drill
from tests.compose.stack import Stack


def test_load_drill_smoke(stack: Stack, report) -> None:
    token = stack.issue_token("loadsmoke", "agent", "read,write")
    target = load_drill.Target("compose", stack.ingest_url, stack.recall_url, token)
    result = load_drill.run(target, agents=3, duration=6, think=0.2, seed_facts=30)
    assert result["errors_5xx"] == 0, result["errors"]
    assert result["lost_writes"] == 0
    assert result["routes"]["POST /v1/search"]["n"] > 0
    assert result["routes"]["hook UserPromptSubmit"]["n"] > 0
    report["load drill smoke (3 agents, 6 s)"] = (
        f"{result['calls']} calls, {result['throughput']:.1f}/s, search p50 "
        f"{result['routes']['POST /v1/search']['p50']:.0f} ms, 0 5xx, 0 lost"
    )
