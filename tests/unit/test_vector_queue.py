"""The vector worker's deferral: imports first, vectors after, but never starved."""

from __future__ import annotations

import time

from factbank.write import vectors


def test_the_worker_waits_for_a_running_import_but_not_forever(monkeypatch):
    monkeypatch.setattr(vectors, "_import_seen", 0.0)
    now = time.monotonic() + 1000
    assert not vectors.defer(now, None)  # no import seen: drain
    monkeypatch.setattr(vectors, "_import_seen", now - vectors.QUIET_S / 2)
    assert vectors.defer(now, None)  # a chunk came just now: wait
    assert vectors.defer(now, now - vectors.MAX_DEFER_S / 2)
    assert not vectors.defer(now, now - vectors.MAX_DEFER_S - 1)  # waited long enough: a round
    monkeypatch.setattr(vectors, "_import_seen", now - vectors.QUIET_S - 0.1)
    assert not vectors.defer(now, now - 1)  # the import is over
    vectors.importing()
    assert vectors.defer(time.monotonic(), None)
