"""The vector worker's deferral: imports first, vectors after, but never starved."""

from __future__ import annotations

import asyncio
import time

import pytest

from factbank.write import vectors


def test_the_worker_waits_for_a_running_import_but_not_forever(monkeypatch):
    monkeypatch.setattr(vectors, "_import_seen", 0.0)
    monkeypatch.setattr(vectors, "_imports", 0)
    now = time.monotonic() + 1000
    assert vectors.defer(now, None) == 0  # no import seen: drain
    monkeypatch.setattr(vectors, "_imports", 1)
    assert vectors.defer(now, None) == vectors.QUIET_S  # an import is running: wait, look again
    assert vectors.defer(now, now - vectors.MAX_DEFER_S / 2) > 0
    assert vectors.defer(now, now - vectors.MAX_DEFER_S + 0.1) <= 0.1 + 1e-9  # never beyond
    assert vectors.defer(now, now - vectors.MAX_DEFER_S - 1) == 0  # waited long enough: a round
    monkeypatch.setattr(vectors, "_imports", 0)
    monkeypatch.setattr(vectors, "_import_seen", now - vectors.QUIET_S / 4)
    # An import ended just now: wait until QUIET_S after its end (its next chunk may come),
    # not a moment longer.
    assert abs(vectors.defer(now, None) - vectors.QUIET_S * 3 / 4) < 1e-9
    monkeypatch.setattr(vectors, "_import_seen", now - vectors.QUIET_S - 0.1)
    assert vectors.defer(now, now - 1) == 0  # the import is over


def test_an_import_defers_the_worker_while_it_runs_and_after_it_fails(monkeypatch):
    monkeypatch.setattr(vectors, "_imports", 0)
    seen = []

    @vectors.deferring
    async def importing(fail: bool) -> int:
        seen.append((vectors._imports, vectors.defer(time.monotonic(), None)))
        if fail:
            raise ValueError("refused")
        return 7

    assert asyncio.run(importing(False)) == 7
    assert seen == [(1, vectors.QUIET_S)]
    assert vectors._imports == 0
    assert 0 < vectors.defer(time.monotonic(), None) <= vectors.QUIET_S  # just ended
    with pytest.raises(ValueError):
        asyncio.run(importing(True))
    assert vectors._imports == 0  # a refused import does not hold the worker forever
