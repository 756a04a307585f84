"""Fact-side hubness, second pass: which hub figure, which centring, which weight, on every
dev set and bank, dense and hybrid (exploration; hubs-2.md).

The hub figure of a fact's own vector (questions untouched):
- "top20": its mean cosine to its 20 nearest plain background lines (hubs.py's "bg");
- "centroid": its cosine to the centroid of the plain background (one dot product, so the
  search SQL can return it beside the cosine, as it returns the language axis).
Centring, so the figure is not one more language offset:
- "bank": less the mean over the bank's vectors of the same language group (`en_share` >= 0.5);
- "bg": less the background's own level, the mean of the figure over the plain background
  lines of each language, mixed by the vector's `en_share` (no bank statistic: what the
  service could use).
Ranking score: the product's, with each own-vector dense hit's cosine less beta x figure.

    python evals/reports/2026-12-06/hubs2.py [--data ../shared/evaldata]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
from variants_loader import V

from factbank_evals import beir
from factbank_evals import dev_sets as ds
from factbank_evals import fusion_sweep as fs

BETAS = (0.15, 0.25, 0.35, 0.5)
SPLITS = ("all", "paraphrase", "crosslingual", "en>zh", "zh>en", "en>en", "zh>zh")


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def figure(vecs: np.ndarray, kind: str) -> np.ndarray:
    bg = fs.background_vectors()
    rows = np.concatenate([bg.groups[("zh", False)], bg.groups[("en", False)]])
    ref = bg.matrix[rows]
    x = _unit(vecs)
    if kind == "centroid":
        c = ref.mean(axis=0)
        return x @ (c / np.linalg.norm(c))
    sim = x @ ref.T
    return -np.sort(-sim, axis=1)[:, :20].mean(axis=1)


def background_level(kind: str) -> dict[str, float]:
    """The figure's mean over the plain background lines of each language (top20: each line
    against the others, itself left out)."""
    bg = fs.background_vectors()
    out = {}
    for lang in ("zh", "en"):
        rows = bg.groups[(lang, False)]
        if kind == "centroid":
            out[lang] = float(figure(bg.matrix[rows], kind).mean())
        else:
            allrows = np.concatenate([bg.groups[("zh", False)], bg.groups[("en", False)]])
            sim = bg.matrix[rows] @ bg.matrix[allrows].T
            sim[sim > 0.9999] = -np.inf
            out[lang] = float((-np.sort(-sim, axis=1)[:, :20]).mean())
    return out


def centred(bank, kind: str, how: str) -> np.ndarray:
    """Per fact: its own vector's figure, centred."""
    bg = fs.background_vectors()
    f = figure(bank.vecs, kind)
    share = bg.en_shares(bank.vecs)
    own = ~np.asarray(bank.vec_question)
    if how == "bank":
        en = share >= 0.5
        out = np.zeros_like(f)
        for g in (True, False):
            m = own & (en == g)
            if m.any():
                out[m] = f[m] - f[m].mean()
    else:
        lv = background_level(kind)
        out = f - ((1 - share) * lv["zh"] + share * lv["en"])
    per_fact = np.zeros(int(bank.vec_fact.max()) + 1)
    per_fact[bank.vec_fact[own].astype(int)] = out[own]
    return per_fact


def ranked(row, case, per_fact, beta, lexical) -> list[int]:
    dense = [h if h.form == "question" else replace(h, score=h.score - beta * per_fact[h.fact_id])
             for h in row["dense"]]
    return V.rank(dict(row, dense=dense), case, {}, lexical)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    args = ap.parse_args()
    built = V.cases(args.data, round3=True)
    bg = fs.background_vectors()
    for name in ("cmrc2018-trial", "mlqa-r-zh-dev", "tatoeba-zh2en"):
        b, q, s = ds.beir_bank(beir.load(args.data / name))
        built[name] = {"rows": V._rows(b, q, bg), "bank": b, "successor": s}
    configs = [(k, h) for k in ("top20", "centroid") for h in ("bank", "bg")]
    head = ["plain", "product"] + [f"{k}/{h} b{b}" for k, h in configs for b in BETAS]
    print("| set | split | " + " | ".join(head) + " | (dense / hybrid) |")
    print("|---|---|" + "---|" * len(head))
    for name, case in built.items():
        cols = [(V.r5(case, lambda row: row["plain"]),) * 2,
                (V.r5(case, lambda row, c=case: V.rank(row, c, {}, [])),
                 V.r5(case, lambda row, c=case: V.rank(row, c, {}, row["lexical"])))]
        for k, h in configs:
            pf = centred(case["bank"], k, h)
            for b in BETAS:
                cols.append(tuple(
                    V.r5(case, lambda row, c=case, pf=pf, b=b, lex=lex:
                         ranked(row, c, pf, b, row["lexical"] if lex else []))
                    for lex in (False, True)))
        for split in sorted(cols[0][0]):
            if not any(split.startswith(p) or split.endswith(p) for p in SPLITS):
                continue
            cells = " | ".join(f"{d[split]:.3f} / {hy[split]:.3f}" for d, hy in cols)
            print(f"| {name} | {split} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
