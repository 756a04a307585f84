"""The plain references beside the product's numbers: exact cosine of the same
embedder and a plain RRF (k=5) of BM25 and that cosine.

Why here and not from the service: "plain" means no index, no candidate groups, no centring,
no cohort. The bank's own stored vectors are read once from Postgres (every vector of every
fact: its content and its writer questions), the query is embedded in this process by the
service's configured embedder (`FACTBANK_EMBEDDER`, the same model and prefixes), and every
fact is scored by its best vector with numpy: an exact scan. BM25 is the service's own
lexical mode (equal to rank_bm25's Okapi, tests/integration/test_bm25.py).
"""

from __future__ import annotations

import asyncio

import numpy as np

from factbank_evals.stack import Stack

RRF_K = 5


async def _vectors(dsn: str, bank: str) -> tuple[np.ndarray, np.ndarray]:
    from factbank.store import db

    conn = await db.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT fv.fact_id, fv.embedding::text AS v FROM fact_vectors fv "
            "JOIN banks b ON b.id = fv.bank_id WHERE b.name = $1 ORDER BY fv.fact_id, fv.ord",
            bank,
        )
    finally:
        await conn.close()
    ids = np.array([r["fact_id"] for r in rows], dtype=np.int64)
    vecs = np.array([np.fromstring(r["v"].strip("[]"), sep=",") for r in rows],
                    dtype=np.float32).reshape(len(rows), -1)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return ids, vecs / np.where(norms > 0, norms, 1.0)


class ExactCosine:
    """Exact plain cosine over one bank's stored vectors, a fact at its best vector."""

    def __init__(self, stack: Stack) -> None:
        from factbank.settings import Settings
        from factbank.text import embedder

        loaded = embedder.load(Settings.from_env().embedder)
        if loaded.embedder is None:
            raise RuntimeError(f"no embedder for the plain reference: {loaded.error}")
        self.model = loaded.embedder
        self.fact_ids, self.vecs = asyncio.run(_vectors(stack.dsn, stack.bank))

    def ranked(self, text: str, limit: int = 50) -> list[int]:
        q = np.asarray(self.model.query(text), dtype=np.float32)
        cos = self.vecs @ (q / max(float(np.linalg.norm(q)), 1e-12))
        best: dict[int, float] = {}
        for i in np.argsort(-cos, kind="stable"):
            best.setdefault(int(self.fact_ids[i]), float(cos[i]))
            if len(best) >= limit:
                break
        return list(best)


def rrf(*lists: list[int], k: int = RRF_K) -> list[int]:
    """Plain reciprocal rank fusion of ranked fact-id lists (the notes' baseline, k=5)."""
    scores: dict[int, float] = {}
    for ranked in lists:
        for rank, fid in enumerate(ranked, start=1):
            scores[fid] = scores.get(fid, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda f: (-scores[f], f))
