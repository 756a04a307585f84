"""Lexical weighting variants for hybrid, every dev set and bank in one table.

Not part of the product: the script behind hybrid-floor.md in this folder. It builds each
bank's candidates once, as `factbank_evals.dev_sets` and `mixed_banks` do (BM25 top 50, the
50 nearest vectors per language group, each with its `en_share`, the query's Background), and
ranks them with `fusion.raw_scores` (the cohort ranking of `search._rank`) plus a variant's
extra lexical term, added to in-language lexical hits only (the cross-language weighting is
untouched):

- `flat w`: w x the product's own lexical evidence (0.5 coverage + 0.5 BM25 / best BM25);
- `rank w k n`: w x (k + 1) / (k + r) for the lexical leg's ranks r <= n (a rank-aware term);
- `apart w t`: w for the BM25 top hit when it stands apart from BM25's own next hits:
  (s1 - s2) / (s2 - s_median of the top 10) >= t;
- `ratio w t`: w for the BM25 top hit when s1 / s2 >= t.

    python evals/reports/2026-12-05/hybrid_floor.py [--data ../shared/evaldata]

Embeddings come from /tmp/factbank-fusion-cache (7+ minutes cold under load); the built rows
are kept in /tmp/factbank-hybrid-floor/ (delete it after changing the product's code).
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

import numpy as np

from factbank.read import fusion as F
from factbank.text.tokenizer import language
from factbank_evals import beir
from factbank_evals import dev_sets as ds
from factbank_evals import fusion_sweep as fs
from factbank_evals import mixed_banks as mb

ROWS = Path("/tmp/factbank-hybrid-floor")
SINGLE = ("cmrc2018-trial", "mlqa-r-zh-dev", "tatoeba-zh2en", "xquad-r-en2zh", "xquad-r-zh2en",
          "xquad-r-zh2zh")
AM = ("bare", "tags", "questions", "tags+questions", "half-questions")


def _rows(bank, queries, bg):
    """Per query: both legs, the plain cosine order, the background (dev_sets' rankings)."""
    qvecs = fs.embed_cached([q.text for q in queries], "query")
    return [{"q": q, "lexical": leg.lexical, "dense": leg.dense, "plain": leg.plain,
             "qterms": len(set(leg.qtoks)), "qlang": language(q.text),
             "background": leg.background}
            for q, leg in zip(queries, ds.query_legs(bank, queries, qvecs, bg), strict=True)]


def _loaders(data: Path) -> dict:
    out = {name: (lambda n=name: ds.beir_bank(beir.load(data / n))) for name in SINGLE}
    out |= {f"agent-memory ({c})": (lambda c=c: ds.agent_memory_bank(c)) for c in AM}
    out["mixed XQuAD-R"] = lambda: mb.dev_bank(data)
    return out


def cases(data: Path, names=None) -> dict[str, dict]:
    """Every bank's rows, each built once and kept under ROWS (one pickle per bank)."""
    bg = fs.background_vectors()
    built = {}
    for name, load in _loaders(data).items():
        if names and name not in names:
            continue
        path = ROWS / (name.replace(" ", "_").replace("(", "").replace(")", "") + ".pkl")
        if not path.exists():
            b, q, s = load()
            ROWS.mkdir(parents=True, exist_ok=True)
            path.write_bytes(pickle.dumps({"rows": _rows(b, q, bg), "bank": b, "successor": s}))
        built[name] = pickle.loads(path.read_bytes())
    return built


def extra(row, case, v: tuple) -> dict[int, float]:
    """The variant's extra lexical term per fact (in-language hits only)."""
    if not v or not row["lexical"] or not row["dense"]:
        return {}
    doc_lang = case["bank"].fact_lang
    lex = row["lexical"]
    kind = v[0]
    s = [h.score for h in lex]
    out: dict[int, float] = {}
    for r, h in enumerate(lex, start=1):
        if F.language_pair(row["qlang"], doc_lang[h.fact_id]) in ("zh>en", "en>zh"):
            continue
        add = 0.0
        if kind == "flat":
            ev = F.lexical_evidence(h, s[0], row["qterms"], "same")
            add = v[1] * ev / F.DEFAULT.lexical_weight
        elif kind == "rank" and r <= v[3]:
            add = v[1] * (v[2] + 1) / (v[2] + r)
        elif kind == "apart" and r == 1 and len(s) > 2:
            ref = float(np.median(s[1:10]))
            if s[1] > ref and (s[0] - s[1]) / (s[1] - ref) >= v[2]:
                add = v[1]
            elif s[1] <= ref and s[0] > s[1]:
                add = v[1]
        elif kind == "ratio" and r == 1 and (len(s) == 1 or s[0] >= v[2] * s[1]):
            add = v[1]
        if add:
            out[h.fact_id] = max(out.get(h.fact_id, 0.0), add)
    return out


def rank(row, case, v: tuple, lexical) -> list[int]:
    bank = case["bank"]
    doc_lang, tagged = dict(enumerate(bank.fact_lang)), dict(enumerate(bank.fact_tagged))
    c = F.Candidates(lexical, row["dense"], row["qterms"], row["qlang"], doc_lang, tagged,
                     row["background"])
    scored = F.raw_scores(c, cohort=F.cohort_means(row["dense"], doc_lang))
    if lexical and v:
        more = extra(row, case, v)
        scored = sorted(((f, sc + more.get(f, 0.0)) for f, sc in scored),
                        key=lambda x: (-x[1], x[0]))
    return [f for f, _ in scored]


def r5(case, ranked_of) -> dict[str, float]:
    rows = case["rows"]
    return ds.r5_by_split([row["q"] for row in rows], (ranked_of(row) for row in rows),
                          case["successor"])


def plain(case) -> tuple[dict, dict]:
    cos = r5(case, lambda row: row["plain"])
    rrf = r5(case, lambda row: fs.rrf(row["lexical"],
                                       [F.LegHit(f, 0.0) for f in row["plain"][: ds.CANDIDATES]]))
    return cos, rrf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    ap.add_argument("--variants", default="")
    ap.add_argument("--sets", default="", help="only these banks (comma-separated)")
    args = ap.parse_args()
    built = cases(args.data, [s for s in args.sets.split(",") if s])
    variants = [()] + [tuple(float(x) if i else x for i, x in enumerate(s.split()))
                       for s in args.variants.split(",") if s]
    names = ["product"] + [s for s in args.variants.split(",") if s]
    print("| set | split | cosine | rrf | dense | " + " | ".join(f"hybrid {n}" for n in names)
          + " |")
    print("|---|---|---|---|---|" + "---|" * len(names))
    for name, case in built.items():
        cos, rrf = plain(case)
        dense = r5(case, lambda row, c=case: rank(row, c, (), []))
        hyb = [r5(case, lambda row, v=v, c=case: rank(row, c, v, row["lexical"]))
               for v in variants]
        for split in sorted(cos, key=lambda k: (k != "all", k)):
            target = max(cos[split], rrf[split])
            cells = " | ".join(f"{h[split]:.3f}{'*' if h[split] < target - 1e-9 else ''}"
                               for h in hyb)
            print(f"| {name} | {split} | {cos[split]:.3f} | {rrf[split]:.3f} | "
                  f"{dense[split]:.3f} | {cells} |")


if __name__ == "__main__":
    main()
