"""Ranking variants for bare facts in mixed banks, every affected split in one table.

Not part of the product: the script behind bare-facts.md in this folder. It builds each
bank's candidates once (as `factbank_evals.dev_sets` and `mixed_banks` do: 50 nearest
vectors per language group, each with its `en_share`, the query's Background), then ranks
them with `fusion.raw_scores` under each variant:

- `bank_share`, `pair_scale`: FusionParams.bank_share and the ranking's language-pair
  offsets (offset_en_en, rank_offset_zh_en, rank_offset_en_zh) times `pair_scale`;
- `trim`: the cohort is the mean of the group's ranks trim+1..bank_cohort, not 1..;
- `maxn`: minus maxn x (the query's cosine spread over the plain background) x E[max of n
  standard normals], n the fact's number of vectors (the best-of-n advantage under the null).

    python evals/reports/2026-12-05/variants.py [--data ../shared/evaldata]

Embeddings come from /tmp/factbank-fusion-cache (7+ minutes cold under load).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from factbank.read import fusion as F
from factbank.text.tokenizer import language, tokenize
from factbank_evals import beir
from factbank_evals import dev_sets as ds
from factbank_evals import fusion_sweep as fs
from factbank_evals import mixed_banks as mb
from factbank_evals.metrics import recall_at

EMAX = {1: 0.0, 2: 0.5642, 3: 0.8463, 4: 1.0294, 5: 1.1630}
VARIANTS = {
    "product": {},
    "no pair offsets, share 0": {"bank_share": 0.0, "pair_scale": 0.0},
    "no pair offsets, share 0.25": {"bank_share": 0.25, "pair_scale": 0.0},
    "no pair offsets, share 0.5": {"pair_scale": 0.0},
    "half pair offsets, share 0.25": {"bank_share": 0.25, "pair_scale": 0.5},
    "no pair offsets, trimmed cohort, share 1": {"pair_scale": 0.0, "trim": 10, "bank_share": 1.0},
    "max-of-n x0.5": {"maxn": 0.5},
    "max-of-n x1": {"maxn": 1.0},
}


def _rows(bank, queries, bg):
    """Per query: both legs, the plain cosine order, the background (dev_sets' rankings)."""
    from rank_bm25 import BM25Okapi

    shares = bg.en_shares(bank.vecs)
    toks = [tokenize(t) for t in bank.lexical_texts]
    bm25 = BM25Okapi([t if t else [""] for t in toks])
    token_sets = [set(t) for t in toks]
    qvecs = fs.embed_cached([q.text for q in queries], "query")
    langs = np.array(bank.vec_lang)
    groups = [g for g in (np.where(langs == "zh")[0], np.where(langs != "zh")[0]) if g.size]
    out = []
    for qi, q in enumerate(queries):
        qtoks = tokenize(q.text)
        lexical = []
        if qtoks:
            scores = np.asarray(bm25.get_scores(qtoks))
            for d in np.argsort(-scores, kind="stable")[: 5 * ds.CANDIDATES]:
                if len(lexical) < ds.CANDIDATES and (m := len(set(qtoks) & token_sets[d])):
                    lexical.append(F.LegHit(int(d), float(scores[d]), m))
        cos = bank.vecs @ qvecs[qi]
        best: dict[int, float] = {}
        for v in np.argsort(-cos, kind="stable"):
            best.setdefault(int(bank.vec_fact[v]), float(cos[v]))
        top = sorted(np.concatenate([g[np.argsort(-cos[g], kind="stable")[: ds.CANDIDATES]]
                                     for g in groups]).tolist(), key=lambda v: (-cos[v], v))
        dense = [F.LegHit(int(bank.vec_fact[v]), float(cos[v]), lang=bank.vec_lang[v],
                          form="question" if bank.vec_question[v] else None,
                          en_share=float(shares[v])) for v in top]
        q_unit = qvecs[qi] / np.linalg.norm(qvecs[qi])
        plain_bg = np.concatenate([bg.groups[("zh", False)], bg.groups[("en", False)]])
        out.append({"q": q, "lexical": lexical, "dense": dense, "plain": list(best),
                    "qterms": len(set(qtoks)), "qlang": language(q.text),
                    "background": F.Background.for_query(qvecs[qi], bg),
                    "spread": float((bg.matrix[plain_bg] @ q_unit).std())})
    return out


def cases(data: Path) -> dict[str, dict]:
    bg = fs.background_vectors()
    out = {}
    for cfg in ("bare", "half-questions", "questions"):
        bank, queries, successor = ds.agent_memory_bank(cfg)
        out[f"agent-memory ({cfg})"] = (bank, queries, successor)
    for name in ("xquad-r-zh2zh", "xquad-r-en2zh", "xquad-r-zh2en"):
        out[name] = ds.beir_bank(beir.load(data / name))
    zh, en = beir.load(data / "xquad-r-zh2zh"), beir.load(data / "xquad-r-zh2en")
    en_q = beir.load(data / "xquad-r-en2zh")
    ids, texts, langs = mb._bank(zh, en, mb.mixed_lang)
    n = len(ids)
    mixed = ds.Bank("mixed XQuAD-R", np.arange(n), fs.embed_cached(texts, "passage"), langs,
                    [False] * n, texts, langs, [False] * n)
    pos = {d: i for i, d in enumerate(ids)}
    mq = []
    for qlang, src in (("zh", zh), ("en", en_q)):
        for qid, text in src.queries.items():
            gold = src.qrels.get(qid, {})
            if gold:
                glang = mb.mixed_lang(mb._article(next(iter(gold))))
                mq.append(ds.Query(qid, text, {pos[d] for d in gold if d in pos}, "all",
                                   (f"{qlang}>{glang}",)))
    out["mixed XQuAD-R"] = (mixed, mq, {})
    return {name: {"rows": _rows(b, q, bg), "bank": b, "successor": s}
            for name, (b, q, s) in out.items()}


def rank(row, case, v, lexical) -> list[int]:
    p = F.DEFAULT
    s = v.get("pair_scale", 1.0)
    params = replace(p, offset_en_en=p.offset_en_en * s, rank_offset_zh_en=p.rank_offset_zh_en * s,
                     rank_offset_en_zh=p.rank_offset_en_zh * s,
                     bank_share=v.get("bank_share", p.bank_share))
    bank = case["bank"]
    doc_lang, tagged = dict(enumerate(bank.fact_lang)), dict(enumerate(bank.fact_tagged))
    dense = row["dense"]
    groups: dict[bool, list[float]] = {}
    for h in dense:
        groups.setdefault(h.lang == "zh", []).append(h.score)
    t = v.get("trim", 0)
    cohort = {g: float(np.mean(sorted(x, reverse=True)[t: params.bank_cohort] or [max(x)]))
              for g, x in groups.items()}
    c = F.Candidates(lexical, dense, row["qterms"], row["qlang"], doc_lang, tagged,
                     row["background"])
    scored = F.raw_scores(c, params, cohort=cohort)
    if v.get("maxn"):
        nvec = np.bincount(bank.vec_fact.astype(int))
        scored = sorted(((f, sc - v["maxn"] * row["spread"] * EMAX[min(5, int(nvec[f]))])
                         for f, sc in scored), key=lambda x: (-x[1], x[0]))
    return [f for f, _ in scored]


def r5(case, ranked_of) -> dict[str, float]:
    acc: dict[str, list[float]] = {}
    for row in case["rows"]:
        q = row["q"]
        ranked = [f for f, _ in fs.redirect([(f, -i) for i, f in enumerate(ranked_of(row))],
                                            case["successor"])]
        for k in {"all", q.kind, *q.splits}:
            acc.setdefault(k, []).append(recall_at(ranked, q.answers, 5))
    return {k: float(np.mean(x)) for k, x in acc.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    built = cases(ap.parse_args().data)
    print("| set | split | plain cosine | " + " | ".join(VARIANTS) + " (dense / hybrid) |")
    print("|---|---|---|" + "---|" * len(VARIANTS))
    for name, case in built.items():
        plain = r5(case, lambda row: row["plain"])
        cols = [(r5(case, lambda row, v=v, c=case: rank(row, c, v, [])),
                 r5(case, lambda row, v=v, c=case: rank(row, c, v, row["lexical"])))
                for v in VARIANTS.values()]
        for split in sorted(plain):
            cells = " | ".join(f"{d[split]:.3f} / {h[split]:.3f}" for d, h in cols)
            print(f"| {name} | {split} | {plain[split]:.3f} | {cells} |")


if __name__ == "__main__":
    main()
