"""The third round's harness (`../2026-12-05/variants.py`: its banks, candidates, product
ranking and R@5), loaded once for this folder's scripts, which import `V` from here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "variants", Path(__file__).resolve().parent.parent / "2026-12-05" / "variants.py")
V = importlib.util.module_from_spec(_spec)
sys.modules["variants"] = V
_spec.loader.exec_module(V)


def by_best_vector(sims, vec_fact) -> list[list[int]]:
    """Per query (a row of `sims`, one column per vector): the facts, each by its best vector,
    best first (ties in fact order)."""
    import numpy as np

    nf = int(vec_fact.max()) + 1
    out = []
    for s in sims:
        best = np.full(nf, -np.inf)
        np.maximum.at(best, vec_fact.astype(int), s)
        out.append(list(np.argsort(-best, kind="stable")))
    return out
