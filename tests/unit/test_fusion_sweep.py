"""The calibration that chose fusion.py's gate and offsets (evals/fusion_sweep.py)."""

from __future__ import annotations

import pytest

from factbank_evals import fusion_sweep as fs

# Four answerable queries, R@5 weight 0.25 each: (best hit, [(gold confidence, weight)]).
QUERIES = [
    (0.10, [(0.10, 0.25)]),
    (0.09, [(0.05, 0.25)]),  # a weak gold ranked under a good first answer
    (0.06, [(0.06, 0.25)]),
    (0.04, []),  # no gold in the top 5: the gate costs nothing here
]


def test_loss_counts_gated_queries_and_golds_under_the_companion_floor():
    assert fs._loss(QUERIES, 0.0, 0.02) == 0.0
    # gate 0.07: the 0.06 query is refused; the 0.05 gold is a companion (>= 0.05).
    assert fs._loss(QUERIES, 0.07, 0.02) == pytest.approx(0.25)
    # Without companions the 0.05 gold is lost too.
    assert fs._loss(QUERIES, 0.07, 0.0) == pytest.approx(0.5)


def test_max_gate_is_the_highest_gate_within_budget():
    # Up to 0.07 only the 0.06 query is refused; above it the 0.05 gold is lost as well.
    gate = fs._max_gate(QUERIES, 0.02, budget=0.25)
    assert gate == pytest.approx(0.07, abs=1e-6)
    assert fs._loss(QUERIES, gate, 0.02) <= 0.25
    assert fs._loss(QUERIES, gate + 1e-4, 0.02) > 0.25
    # A gate on the best hit sits higher than a fact-by-fact floor for the same budget.
    assert gate > fs._max_gate(QUERIES, 0.0, budget=0.25)


def test_calibrate_sets_the_gate_on_zh_zh_and_the_smallest_offset_per_pair(monkeypatch):
    monkeypatch.setattr(fs, "MAX_R5_DROP", 0.25)
    zh = [(top, "zh>zh", [(x, "zh>zh", w) for x, w in golds]) for top, golds in QUERIES]
    # The same answers 0.03 lower across languages: the offset must give that back.
    en = [(top - 0.03, "zh>en", [(x - 0.03, "zh>en", w) for x, w in golds])
          for top, golds in QUERIES]
    out = fs.calibrate({"cmrc2018-trial": zh, "tatoeba-zh2en": en}, [], 0.02)
    assert out["center"] == pytest.approx(0.07, abs=1e-6)
    assert out["offset_zh_en"] == pytest.approx(0.03, abs=1e-6)
