"""Ranking variants for bare facts in mixed banks, every affected split in one table.

Not part of the product: the script behind bare-facts.md in this folder. It builds each
bank's candidates once (as `factbank_evals.dev_sets` and `mixed_banks` do: 50 nearest
vectors per language group, each with its `en_share`, the query's Background), then ranks
them with `fusion.raw_scores` under each variant:

- `bank_share`, `pair_scale`: FusionParams.bank_share and the ranking's language-pair
  offsets (offset_en_en, rank_offset_zh_en, rank_offset_en_zh) times `pair_scale`;
- `trim`: the cohort is the mean of the group's ranks trim+1..bank_cohort, not 1..;
- `maxn`: minus maxn x (the query's cosine spread over the plain background) x E[max of n
  standard normals], n the fact's number of vectors (the best-of-n advantage under the null);
- `quota` (own, other), third round (bare-facts-3.md): the first own + other places of the
  list go to the best `own` facts of the query's language group and the best `other` of the
  other group, each in the variant's score order (groups by `en_share` >= 0.5: the query's
  vector, each fact's own vector), the rest follows in score order.

`--round 3` ranks the third round's variants (`VARIANTS3`: a grid of pair-offset scale x
share, the quotas) on two more banks built from XQuAD-R (every article in both languages:
same subjects; one article in four in both, the rest split as in the mixed bank) and prints
each bank's overlap figure (`overlap`) first.

`--lexical-auc` prints instead whether the lexical leg tells which language holds a query's
answer (AUC of three lexical signals, own language group minus other, for the queries whose
gold is in their own group against those whose gold is in the other) on the bare agent bank
and the mixed XQuAD-R bank.

    python evals/reports/2026-12-05/variants.py [--data ../shared/evaldata] [--round 3]
    python evals/reports/2026-12-05/variants.py --lexical-auc

Embeddings come from /tmp/factbank-fusion-cache (7+ minutes cold under load).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from factbank.read import fusion as F
from factbank.text.tokenizer import language
from factbank_evals import beir
from factbank_evals import dev_sets as ds
from factbank_evals import fusion_sweep as fs
from factbank_evals import mixed_banks as mb

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

VARIANTS3 = {
    "product": {},
    **{f"pairs x{ps:g}, share {sh:g}": {"pair_scale": ps, "bank_share": sh}
       for ps in (0.0, 0.5, 1.0) for sh in (0.0, 0.25, 0.5, 0.75, 1.0)
       if (ps, sh) != (1.0, 0.5)},
    "quota 4+1": {"quota": (4, 1)},
    "quota 3+2": {"quota": (3, 2)},
    "no pairs, share 0.25, quota 4+1": {"pair_scale": 0.0, "bank_share": 0.25, "quota": (4, 1)},
    "no pairs, share 0.25, quota 3+2": {"pair_scale": 0.0, "bank_share": 0.25, "quota": (3, 2)},
}


def overlap(bank, bg) -> tuple[float, int, int]:
    """Median over facts of (cosine to the nearest fact of the other language group - cosine
    to the nearest other fact of its own), each fact by its own vector, groups by `en_share`
    >= 0.5; and the two groups' sizes. Near 0: both languages hold the same subjects."""
    own = np.array([not q for q in bank.vec_question])
    vecs = bank.vecs[own] / np.linalg.norm(bank.vecs[own], axis=1, keepdims=True)
    en = bg.en_shares(vecs) >= 0.5
    sim = vecs @ vecs.T
    np.fill_diagonal(sim, -np.inf)
    diff = [sim[i, en != en[i]].max() - sim[i, en == en[i]].max() for i in range(len(vecs))
            if (en != en[i]).any() and (en == en[i]).sum() > 1]
    return (float(np.median(diff)) if diff else float("nan"), int((~en).sum()), int(en.sum()))


_QUERY_VECTORS: dict[str, np.ndarray] = {}


def _query_vectors(texts: list[str]) -> np.ndarray:
    """The cached query vectors of a set's own list; a bank built from several sets' queries
    (the mixed ones) takes their rows instead of embedding its own list."""
    if any(t not in _QUERY_VECTORS for t in texts):
        _QUERY_VECTORS.update(zip(texts, fs.embed_cached(texts, "query"), strict=True))
    return np.vstack([_QUERY_VECTORS[t] for t in texts])


def _rows(bank, queries, bg):
    """Per query: both legs, the plain cosine order, the background (dev_sets' rankings; the
    lexical leg looks at BM25's first 5 x CANDIDATES hits only, as this report always did)."""
    qvecs = _query_vectors([q.text for q in queries])
    legs = ds.query_legs(bank, queries, qvecs, bg, scan=5 * ds.CANDIDATES)
    out = []
    for qi, (q, leg) in enumerate(zip(queries, legs, strict=True)):
        q_unit = qvecs[qi] / np.linalg.norm(qvecs[qi])
        plain_bg = np.concatenate([bg.groups[("zh", False)], bg.groups[("en", False)]])
        out.append({"q": q, "lexical": leg.lexical, "dense": leg.dense, "plain": leg.plain,
                    "qterms": len(set(leg.qtoks)), "qlang": language(q.text),
                    "q_en": float(bg.en_shares(qvecs[qi : qi + 1])[0]) >= 0.5,
                    "background": leg.background,
                    "spread": float((bg.matrix[plain_bg] @ q_unit).std())})
    return out


def _xquad_both(data: Path, both) -> tuple:
    """XQuAD-R with the articles `both(article)` in both languages (the rest as in the mixed
    bank). Each query counts twice where its answer is held in both languages: once with the
    same-language sentence as gold ("zh>zh same"), once with the other-language one ("zh>en
    cross", the translation of the same sentence), as the agent set's paraphrase and
    crosslingual splits do; where only one language holds it, as in the mixed bank. Vectors
    are the cached rows of the two whole corpora."""
    zh, en = beir.load(data / "xquad-r-zh2zh"), beir.load(data / "xquad-r-zh2en")
    en_q = beir.load(data / "xquad-r-en2zh")
    zvec = fs.embed_cached(zh.doc_texts, "passage")
    evec = fs.embed_cached(en.doc_texts, "passage")
    rows, texts, langs, pos = [], [], [], {}
    for src, lang, vecs in ((zh, "zh", zvec), (en, "en", evec)):
        for i, (d, t) in enumerate(zip(src.doc_ids, src.doc_texts, strict=True)):
            art = mb._article(d)
            if both(art) or mb.mixed_lang(art) == lang:
                pos[(d, lang)] = len(texts)
                rows.append(vecs[i])
                texts.append(t)
                langs.append(lang)
    n = len(texts)
    bank = ds.Bank("xquad", np.arange(n), np.vstack(rows), langs, [False] * n, texts, langs,
                   [False] * n)
    qs = []
    for qlang, src in (("zh", zh), ("en", en_q)):
        for qid, text in src.queries.items():
            gold = src.qrels.get(qid, set())
            for glang in ("zh", "en"):
                ans = {pos[(d, glang)] for d in gold if (d, glang) in pos}
                if not ans:
                    continue
                kind = "same" if glang == qlang else "cross"
                held = all((d, "zh") in pos and (d, "en") in pos for d in gold)
                split = f"{qlang}>{glang} {kind}" if held else f"{qlang}>{glang} one language"
                qs.append(ds.Query(f"{qid}-{glang}", text, ans, kind, (split,)))
    return bank, qs, {}


def cases(data: Path, round3: bool = False) -> dict[str, dict]:
    bg = fs.background_vectors()
    out = {}
    for cfg in ("bare", "half-questions", "questions"):
        bank, queries, successor = ds.agent_memory_bank(cfg)
        out[f"agent-memory ({cfg})"] = (bank, queries, successor)
    for name in ("xquad-r-zh2zh", "xquad-r-en2zh", "xquad-r-zh2en"):
        out[name] = ds.beir_bank(beir.load(data / name))
    out["mixed XQuAD-R"] = mb.dev_bank(data, corpus_vectors=True)
    if round3:
        out["XQuAD-R, 1 article in 4 in both"] = _xquad_both(data, lambda a: a % 4 == 0)
        out["XQuAD-R, every article in both"] = _xquad_both(data, lambda a: True)
    return {name: {"rows": _rows(b, q, bg), "bank": b, "successor": s, "overlap": overlap(b, bg)}
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
    if v.get("quota"):
        scored = _quota(scored, case, row["q_en"], *v["quota"])
    if v.get("maxn"):
        nvec = np.bincount(bank.vec_fact.astype(int))
        scored = sorted(((f, sc - v["maxn"] * row["spread"] * EMAX[min(5, int(nvec[f]))])
                         for f, sc in scored), key=lambda x: (-x[1], x[0]))
    return [f for f, _ in scored]


def _fact_en(case) -> np.ndarray:
    """Each fact's group by its own vector's `en_share` (cached on the case)."""
    if "fact_en" not in case:
        bank = case["bank"]
        shares = fs.background_vectors().en_shares(bank.vecs)
        out = np.zeros(int(bank.vec_fact.max()) + 1, dtype=bool)
        for v in range(len(shares)):
            if not bank.vec_question[v]:
                out[int(bank.vec_fact[v])] = shares[v] >= 0.5
        case["fact_en"] = out
    return case["fact_en"]


def _quota(scored, case, q_en: bool, own: int, other: int):
    fact_en = _fact_en(case)
    mine = [x for x in scored if fact_en[x[0]] == q_en][:own]
    theirs = [x for x in scored if fact_en[x[0]] != q_en][:other]
    head = sorted(mine + theirs, key=lambda x: (-x[1], x[0]))
    taken = {f for f, _ in head}
    return head + [x for x in scored if x[0] not in taken]


def r5(case, ranked_of) -> dict[str, float]:
    rows = case["rows"]
    return ds.r5_by_split([row["q"] for row in rows], (ranked_of(row) for row in rows),
                          case["successor"])


def _auc(pos, neg) -> float:
    pos, neg = np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def lexical_auc(data: Path) -> None:
    """Per query: the best lexical coverage in its own language group, that minus the other
    group's, and the same for BM25; AUC for gold-in-own-group against gold-in-the-other."""
    bg = fs.background_vectors()
    bank, queries, _ = ds.agent_memory_bank("bare")
    mixed = _xquad_both(data, lambda a: False)
    built = {"agent-memory (bare)": {"rows": _rows(bank, queries, bg), "bank": bank},
             "mixed XQuAD-R": {"rows": _rows(mixed[0], mixed[1], bg), "bank": mixed[0]}}
    print("| bank | query | gold own / other | own coverage | own - other coverage |"
          " own - other BM25 |")
    print("|---|---|---|---|---|---|")
    for name, case in built.items():
        fact_en = _fact_en(case)
        sig: dict[tuple[bool, bool], list[tuple[float, float, float]]] = {}
        for row in case["rows"]:
            own = row["q_en"]
            gold = {bool(fact_en[a] == own) for a in row["q"].answers}
            if len(gold) != 1:
                continue
            best = {}
            for h in row["lexical"]:
                g = bool(fact_en[h.fact_id] == own)
                cov = h.matched_terms / max(row["qterms"], 1)
                c, b = best.get(g, (0.0, 0.0))
                best[g] = (max(c, cov), max(b, h.score))
            (co, bo), (ct, bt) = best.get(True, (0.0, 0.0)), best.get(False, (0.0, 0.0))
            sig.setdefault((own, gold.pop()), []).append((co, co - ct, bo - bt))
        for own in (True, False):
            pos, neg = sig.get((own, True), []), sig.get((own, False), [])
            cells = " | ".join(f"{_auc([x[i] for x in pos], [x[i] for x in neg]):.3f}"
                               for i in range(3))
            print(f"| {name} | {'en' if own else 'zh'} | {len(pos)} / {len(neg)} | {cells} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    ap.add_argument("--round", type=int, default=2, choices=(2, 3))
    ap.add_argument("--lexical-auc", action="store_true")
    args = ap.parse_args()
    if args.lexical_auc:
        lexical_auc(args.data)
        return
    variants = VARIANTS3 if args.round == 3 else VARIANTS
    built = cases(args.data, round3=args.round == 3)
    if args.round == 3:
        print("| bank | overlap (median nearest other - nearest own) | zh facts | en facts |")
        print("|---|---|---|---|")
        for name, case in built.items():
            o, nz, ne = case["overlap"]
            print(f"| {name} | {o:+.3f} | {nz} | {ne} |")
        print()
    print("| set | split | plain cosine | " + " | ".join(variants) + " (dense / hybrid) |")
    print("|---|---|---|" + "---|" * len(variants))
    for name, case in built.items():
        plain = r5(case, lambda row: row["plain"])
        cols = [(r5(case, lambda row, v=v, c=case: rank(row, c, v, [])),
                 r5(case, lambda row, v=v, c=case: rank(row, c, v, row["lexical"])))
                for v in variants.values()]
        for split in sorted(plain):
            cells = " | ".join(f"{d[split]:.3f} / {h[split]:.3f}" for d, h in cols)
            print(f"| {name} | {split} | {plain[split]:.3f} | {cells} |")


if __name__ == "__main__":
    main()
