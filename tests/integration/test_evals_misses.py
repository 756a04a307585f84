"""The miss-count eval (evals/misses.py) end to end: seven scripted sessions on two machines
through the real hook command and CLI against a real stack; every count the report gives must
match the script's truth exactly, and the script must exercise every kind and class."""

from __future__ import annotations

import asyncio

import pytest

from factbank_evals import misses

pytestmark = pytest.mark.slow


async def test_miss_counts_match_the_script_exactly(dsn: str, monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", dsn)
    result = await asyncio.to_thread(misses.evaluate)
    assert result["covers_every_kind_and_class"], result["truth"]
    assert result["reported"] == result["expected"], misses.table(result)
    assert result["repeats_reported"] == result["repeats_expected"]
    assert result["nudges_shown"] == result["expected"]["recognised"] == 2
    assert result["expected"]["repeated_correction"] == 1
    assert result["exact"]
    assert "| total |" in result["cli_table"]
