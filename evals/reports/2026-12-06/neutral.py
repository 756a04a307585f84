"""Language-neutral cosine for bare facts in mixed banks: exploration (not the product).

Idea: e5 puts a language component into every vector; the product compensates with
per-pair offsets (constants), which in a same-subjects bank lift the other language's
near-topic facts over same-language answers. Instead remove the language subspace from
query and fact vectors before the cosine (the background's 257 parallel en/zh pairs give
it: the principal directions of en_i - zh_i), and rank by that.

    python evals/reports/2026-12-06/neutral.py [--data ../shared/evaldata]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from variants_loader import V, by_best_vector

from factbank_evals import fusion_sweep as fs


def language_basis(k: int) -> np.ndarray:
    """k orthonormal directions of the en-zh difference over the background's pairs."""
    bg = fs.background_vectors()
    zh = bg.matrix[bg.groups[("zh", False)]]
    en = bg.matrix[bg.groups[("en", False)]]
    d = en - zh
    mean = d.mean(axis=0)
    first = mean / np.linalg.norm(mean)
    if k == 1:
        return first[None, :]
    rest = d - np.outer(d @ first, first)
    _, _, vt = np.linalg.svd(rest, full_matrices=False)
    return np.vstack([first, vt[: k - 1]])


def neutral(x: np.ndarray, basis: np.ndarray | None) -> np.ndarray:
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    if basis is not None and len(basis):
        x = x - (x @ basis.T) @ basis
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def ranked(case, basis) -> list[list[int]]:
    bank = case["bank"]
    vecs = neutral(bank.vecs, basis)
    qv = neutral(V._query_vectors([row["q"].text for row in case["rows"]]), basis)
    return by_best_vector(qv @ vecs.T, bank.vec_fact)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    ap.add_argument("--ks", default="0,1,2,4,8,16,32")
    args = ap.parse_args()
    built = V.cases(args.data, round3=True)
    ks = [int(k) for k in args.ks.split(",")]
    cols = {}
    for k in ks:
        basis = language_basis(k) if k else None
        for name, case in built.items():
            rk = ranked(case, basis)
            it = iter(rk)
            cols[(k, name)] = V.r5(case, lambda row, it=it: next(it))
    prod = {name: V.r5(case, lambda row, c=case: V.rank(row, c, {}, []))
            for name, case in built.items()}
    print("| set | split | product dense | " + " | ".join(f"neutral k={k}" for k in ks) + " |")
    print("|---|---|---|" + "---|" * len(ks))
    for name in built:
        for split in sorted(prod[name]):
            cells = " | ".join(f"{cols[(k, name)][split]:.3f}" for k in ks)
            print(f"| {name} | {split} | {prod[name][split]:.3f} | {cells} |")


if __name__ == "__main__":
    main()
