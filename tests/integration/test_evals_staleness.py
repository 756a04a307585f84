"""Smoke run of the staleness eval (evals/staleness.py): the first four steps of the script
against a real stack. It checks the machinery measures what it claims (the truth counts,
the control injects), and that verify holds its targets on them."""

from __future__ import annotations

import asyncio

import pytest

from factbank_evals import staleness
from factbank_evals.stack import running_stack

pytestmark = pytest.mark.slow


def _smoke(dsn: str) -> dict:
    with running_stack(database_url=dsn) as stack:
        return staleness.evaluate(stack, steps=4, progress=False)


async def test_staleness_eval_smoke(dsn: str) -> None:
    result = await asyncio.to_thread(_smoke, dsn)
    assert [r["step"] for r in result["steps"]] == ["edit", "insert", "whitespace", "delete"]
    # the script's truth: one edited quote, then a deleted file's three
    assert [r["stale_truth"] for r in result["steps"]] == [1, 1, 1, 4]
    s = result["summary"]
    assert (s["stale_precision"], s["stale_recall"], s["relocation_accuracy"]) == (1.0, 1.0, 1.0)
    assert s["stale_injected"] == 0
    assert s["fresh_injected"] > 0, result  # the control: injection works at all
    assert "| stale recall | 1.00 |" in staleness.format_table(result)


def _code(dsn: str) -> dict:
    with running_stack(database_url=dsn) as stack:
        return staleness.evaluate(stack, code_only=True, progress=False)


async def test_staleness_eval_symbol_anchors(dsn: str) -> None:
    """The code steps alone: symbol anchors hold their targets where their line-anchored
    twins cannot (a body edit off the quoted line, a move to another file)."""
    result = await asyncio.to_thread(_code, dsn)
    assert [r["step"] for r in result["steps"]][:3] == ["code-drift", "code-reformat",
                                                          "code-body"]
    assert [r["symbol_stale_truth"] for r in result["steps"]] == [0, 0, 5, 5, 5, 5, 6]
    y = result["symbols"]
    assert (y["precision"], y["recall"], y["location_accuracy"]) == (1.0, 1.0, 1.0)
    assert y["twin_recall"] < 0.5 and y["twin_fp"] > 0  # the control: lines cannot follow
    assert result["summary"]["stale_injected"] == 0
