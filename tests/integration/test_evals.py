"""Smoke run of the eval suite end to end: real ingest, real recall, real grep, a report.

Small on purpose: two queries of each kind of the agent-memory set, over a bank holding only
the facts those queries name (answers, stale versions, hard negatives). It checks that the
machinery measures what it claims, never how good recall is (the fusion is tuned elsewhere).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from factbank_evals import agent_memory as am
from factbank_evals import gate, report, run_all
from factbank_evals.grep_control import GrepControl, patterns
from factbank_evals.stack import running_stack

pytestmark = pytest.mark.slow


def _smoke(dsn: str, out: Path) -> tuple[dict, dict]:
    with running_stack(database_url=dsn) as stack, httpx.Client(
        headers=stack.headers(), timeout=300
    ) as http:
        section = am.evaluate(http, stack, per_kind=2, small_bank=True, progress=False)
    result = {
        "generated": "test",
        "seconds": 0,
        "embedder": None,
        "floor": am.current_floor(),
        "options": {"per_kind": 2},
        "code": run_all.code_state(),
        "sets": [section],
    }
    # The regression gate's smoke run: this small run against the last committed report.
    result["regression"] = gate.against_last(result)
    return section, report.write(result, out)


async def test_agent_memory_smoke(dsn: str, tmp_path: Path) -> None:
    # running_stack runs its own event loops; keep them off the test's loop.
    section, written = await asyncio.to_thread(_smoke, dsn, tmp_path / "report")
    _, cases = am.load_set()
    chosen = am.subset(cases, 2)
    kinds = {c.kind for c in chosen}
    assert kinds == {"exact", "paraphrase", "crosslingual", "refusal", "chronology"}

    # Ingest went through the real write path, supersedes included.
    ing = section["ingest"]
    facts, _ = am.load_set()
    loaded = am.needed_facts(facts, chosen)
    assert ing["stored"] + ing["reinforced"] == len(loaded)
    assert ing["superseded"] == sum(1 for f in loaded if f.get("supersedes")) > 0

    # Every method answered every query, and the numbers are in range.
    records = section["records"]
    for method in (*am.METHODS, "inject"):
        assert [r["q"] for r in records[method]] == [c.id for c in chosen], method
        s = section["summary"][method]
        assert s["queries"] == len(chosen)
        assert s["answerable"] == sum(c.answerable for c in chosen)
        assert 0.0 <= s["r@5"] <= 1.0
        assert s["p50_ms"] > 0
    # docs/principles.md#supersede-keeps-history: a superseded fact is never injected, and recall
    # returns its successor.
    assert section["summary"]["inject"]["stale@5"] == 0.0
    assert section["summary"]["hybrid+floor"]["stale@5"] == 0.0
    # docs/principles.md#small-relevant-injection: the injection block stays inside the prompt
    # budget.
    assert all(r["tokens"] <= 500 for r in records["inject"])
    # The grep control is a competent grep: it finds exact identifiers.
    exact = [r for r in records["grep"] if r["kind"] == "exact"]
    assert all(r["r@5"] == 1.0 for r in exact)

    # The report folder holds the verdict, the tables and both plots.
    out = tmp_path / "report"
    for name in ("report.md", "report.json", "recall_by_method.png", "score_distributions.png"):
        assert (out / name).stat().st_size > 0, name
    verdict = written["verdicts"][0]
    assert verdict["verdict"] in ("PASS", "FAIL")
    assert "Go / no-go" in (out / "report.md").read_text(encoding="utf-8")
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["go_no_go"]
    # The gate compared every agent-memory split with the committed baseline, named the
    # commit range, and says a per-kind smoke run is not comparable with a full one.
    regression = json.loads((out / "report.json").read_text(encoding="utf-8"))["regression"]
    assert regression["baseline"].startswith("evals/reports/")
    assert regression["range"].endswith(".." + run_all.code_state()["commit"])
    assert {r["split"] for r in regression["rows"]} >= {"hybrid+floor", "dense / paraphrase"}
    assert not regression["comparable"]
    assert "Regression gate" in (out / "report.md").read_text(encoding="utf-8")


def test_grep_control_patterns_and_ranking(tmp_path: Path) -> None:
    """What the control greps for, and that it ranks by words matched, newest first."""
    assert patterns("ECONNREFUSED 127.0.0.1:4010") == ["econnrefus", "127.0.0.1:4010"]
    assert "the" not in patterns("Which port is the ledgerline API on?")
    assert patterns("ledgerline 用什么工具装依赖？") == ["ledgerline", "工具", "依赖"]
    with GrepControl(
        [
            ("old", "ledgerline API on port 8080"),
            ("other", "tidemark API on port 9000"),
            ("new", "ledgerline API moved to port 8081"),
        ]
    ) as grep:
        result = grep.search("ledgerline API port")
        assert result.ranked == ["new", "old", "other"]
        assert grep.search("nothing-like-this").ranked == []
        assert result.tokens > 0
