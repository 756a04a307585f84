"""Retrieval metrics over ranked ids, the way BEIR defines them (binary relevance), and the
one latency percentile of the evals and benches.

The evals over HTTP score each query (`score`) and summarise the records (`summarize`); the
in-memory fusion sweep takes plain means over its queries (`mean_at_cutoffs`). Both call the
same R@5, MRR@10 and nDCG@10 below.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Hashable, Sequence


def recall_at(ranked: Sequence[Hashable], relevant: Collection[Hashable], k: int = 5) -> float:
    if not relevant:
        return 0.0
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def mrr_at(ranked: Sequence[Hashable], relevant: Collection[Hashable], k: int = 10) -> float:
    for i, doc in enumerate(ranked[:k], 1):
        if doc in relevant:
            return 1.0 / i
    return 0.0


def ndcg_at(ranked: Sequence[Hashable], relevant: Collection[Hashable], k: int = 10) -> float:
    dcg = sum(1.0 / math.log2(i + 1) for i, doc in enumerate(ranked[:k], 1) if doc in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0


def mean_at_cutoffs(
    ranked: Sequence[Sequence[Hashable]], relevant: Sequence[Collection[Hashable]]
) -> dict[str, float]:
    """Mean R@5, MRR@10 and nDCG@10 over queries, unrounded (the fusion sweep's tables)."""
    r5 = mrr = ndcg = 0.0
    for ids, rel in zip(ranked, relevant, strict=True):
        r5 += recall_at(ids, rel, 5)
        mrr += mrr_at(ids, rel, 10)
        ndcg += ndcg_at(ids, rel, 10)
    n = max(len(ranked), 1)
    return {"R@5": r5 / n, "MRR@10": mrr / n, "nDCG@10": ndcg / n}


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` quantile (0.95 for p95) of `values`; NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(per_query: list[dict]) -> dict:
    """Mean of each metric over queries plus latency percentiles (ms)."""
    if not per_query:
        return {}
    lat = [q["ms"] for q in per_query]
    return {
        "queries": len(per_query),
        "r@5": round(statistics.fmean(q["r@5"] for q in per_query), 3),
        "mrr@10": round(statistics.fmean(q["mrr@10"] for q in per_query), 3),
        "ndcg@10": round(statistics.fmean(q["ndcg@10"] for q in per_query), 3),
        "p50_ms": round(percentile(lat, 0.5), 1),
        "p95_ms": round(percentile(lat, 0.95), 1),
    }


def score(ranked: Sequence[str], relevant: Collection[str], ms: float) -> dict:
    return {
        "r@5": recall_at(ranked, relevant, 5),
        "mrr@10": mrr_at(ranked, relevant, 10),
        "ndcg@10": ndcg_at(ranked, relevant, 10),
        "ms": ms,
    }
