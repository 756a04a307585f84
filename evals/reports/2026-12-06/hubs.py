"""Fact-side hubness in the ranking: exploration (not the product).

A generic fact ("Pull requests now need one approval ...") is near every query of its
language: it took first place for unrelated agent-memory questions at cosine 0.83. CSLS-style
correction: each vector's score less beta x (its mean cosine to its k nearest vectors of
other facts of the bank, less the bank's average of that), within-group ranks then improve,
and the language lift has fewer hubs to lift.

    python evals/reports/2026-12-06/hubs.py [--data ../shared/evaldata]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
from variants_loader import V, by_best_vector

from factbank_evals import fusion_sweep as fs


def hub(bank, k: int, source: str) -> np.ndarray:
    """Per vector: mean cosine to its k nearest rows of `source` ("bank": other facts' own
    vectors; "bg": background plain lines), minus the mean of that over the bank."""
    x = bank.vecs / np.linalg.norm(bank.vecs, axis=1, keepdims=True)
    if source == "bank":
        own = np.array([not q for q in bank.vec_question])
        ref = x[own]
        ref_fact = bank.vec_fact[own]
        sim = x @ ref.T
        sim[bank.vec_fact[:, None] == ref_fact[None, :]] = -np.inf
    else:
        bg = fs.background_vectors()
        rows = np.concatenate([bg.groups[("zh", False)], bg.groups[("en", False)]])
        sim = x @ bg.matrix[rows].T
    kk = min(k, sim.shape[1] - 1)
    top = -np.sort(-sim, axis=1)[:, :kk]
    r = top.mean(axis=1)
    en = fs.background_vectors().en_shares(bank.vecs) >= 0.5
    out = np.zeros_like(r)
    for g in (True, False):
        for q in (True, False):
            m = (en == g) & (np.asarray(bank.vec_question) == q)
            if m.any():
                out[m] = r[m] - r[m].mean()
    return out


def plain_hub(case, r, beta) -> list[list[int]]:
    bank = case["bank"]
    x = bank.vecs / np.linalg.norm(bank.vecs, axis=1, keepdims=True)
    qv = V._query_vectors([row["q"].text for row in case["rows"]])
    qv = qv / np.linalg.norm(qv, axis=1, keepdims=True)
    return by_best_vector(qv @ x.T - beta * r[None, :], bank.vec_fact)


def product_hub(row, case, r_fact_vec, beta, v, lexical):
    """The product's ranking with each dense hit's cosine less beta x its vector's hub term.
    Dense hits carry fact ids only; a fact's hub term is its own vector's (questions too use
    the fact's own vector's term: a simplification of this exploration)."""
    dense = [h if h.form == "question" else replace(h, score=h.score - beta * r_fact_vec[h.fact_id])
             for h in row["dense"]]
    row2 = dict(row, dense=dense)
    return V.rank(row2, case, v, lexical)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    args = ap.parse_args()
    built = V.cases(args.data, round3=False)
    configs = [("bank", 10, b) for b in (0.25, 0.5, 0.75)] + [("bg", 20, b) for b in (0.25, 0.5)]
    variants = {"product": {}, "pairs x0.5 share 0.25": {"pair_scale": 0.5, "bank_share": 0.25}}
    head = ["plain"] + [f"plain hub {s} k{k} b{b}" for s, k, b in configs]
    for vn in variants:
        head += [vn] + [f"{vn} hub {s} k{k} b{b}" for s, k, b in configs]
    print("| set | split | " + " | ".join(head) + " |")
    print("|---|---|" + "---|" * len(head))
    for name, case in built.items():
        bank = case["bank"]
        cols = [V.r5(case, lambda row: row["plain"])]
        hubs = {}
        for s, k, b in configs:
            if (s, k) not in hubs:
                hubs[(s, k)] = hub(bank, k, s)
            it = iter(plain_hub(case, hubs[(s, k)], b))
            cols.append(V.r5(case, lambda row, it=it: next(it)))
        own = np.array([not q for q in bank.vec_question])
        for v in variants.values():
            cols.append(V.r5(case, lambda row, v=v, c=case: V.rank(row, c, v, [])))
            for s, k, b in configs:
                per_fact = np.zeros(int(bank.vec_fact.max()) + 1)
                per_fact[bank.vec_fact[own].astype(int)] = hubs[(s, k)][own]
                cols.append(V.r5(case, lambda row, v=v, pf=per_fact, b=b, c=case:
                                 product_hub(row, c, pf, b, v, [])))
        for split in sorted(cols[0]):
            print(f"| {name} | {split} | " + " | ".join(f"{c[split]:.3f}" for c in cols) + " |")


if __name__ == "__main__":
    main()
