"""Language-fair ranking in a mixed zh/en bank: every (query language -> fact language) pair.

Why this exists: every BEIR dev set holds facts of one language, so per-language background
centring never reorders anything within them, and a bank that mixes zh and en facts on the
same subjects (a real team bank) went unmeasured. An outside check found zh->en R@5 0.30 in
such a bank against 0.82 when each language had its own.

The dev bank: the XQuAD-R sentences of the even articles in Chinese and of
the odd articles in English, in one bank; every question asked in both languages, so each
query is one of four pairs by the language of its gold sentence. Beside it, the same queries
against a single-language bank (all 24 articles in the gold's language), and plain cosine in
the mixed bank (no centring, the control).

Everything goes through the product's own code: the tokenizer, `fusion.raw_scores`, the
shipped background, and the recall service's candidate rule (the 50 nearest vectors per
language group, Chinese and the rest: `search._DENSE_SQL`). BM25 is rank_bm25's Okapi, which
the Postgres BM25 reproduces (tests/integration/test_bm25.py).

    python -m factbank_evals.mixed_banks --data ../shared/evaldata [--json]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from factbank_evals import beir
from factbank_evals import fusion_sweep as fs
from factbank_evals.metrics import recall_at

CANDIDATES = 50
PAIRS = ("zh>zh", "zh>en", "en>zh", "en>en")


def _article(doc_id: str) -> int:
    return int(doc_id.split("p")[0][1:])


def mixed_lang(article: int) -> str:
    """The mixed bank holds even articles in Chinese, odd ones in English."""
    return "zh" if article % 2 == 0 else "en"


def _bank(zh: beir.BeirSet, en: beir.BeirSet, lang_of) -> tuple[list[str], list[str], list[str]]:
    ids, texts, langs = [], [], []
    for src, lang in ((zh, "zh"), (en, "en")):
        for d, t in src.corpus.items():
            if lang_of(_article(d)) == lang:
                ids.append(d)
                texts.append(t)
                langs.append(lang)
    return ids, texts, langs


def dev_bank(data: Path, *, corpus_vectors: bool = False):
    """The mixed bank as a `dev_sets` bank, its queries split by pair ("zh>en"), no successors.

    Why here: the dated report scripts rank this bank with `dev_sets.query_legs`, and each
    must build the same bank and splits as this module measures. `corpus_vectors`: take each
    sentence's row of its whole corpus's cached vectors instead of embedding the bank's own
    list (the same texts; a report that embedded the corpora already keeps its numbers)."""
    from factbank_evals import dev_sets as ds

    zh, en = beir.load(data / "xquad-r-zh2zh"), beir.load(data / "xquad-r-zh2en")
    en_q = beir.load(data / "xquad-r-en2zh")
    ids, texts, langs = _bank(zh, en, mixed_lang)
    n = len(ids)
    if corpus_vectors:
        row = {**{(d, "zh"): v for d, v in zip(zh.doc_ids, fs.embed_cached(zh.doc_texts, "passage"),
                                                strict=True)},
               **{(d, "en"): v for d, v in zip(en.doc_ids, fs.embed_cached(en.doc_texts, "passage"),
                                                strict=True)}}
        vecs = np.vstack([row[(d, g)] for d, g in zip(ids, langs, strict=True)])
    else:
        vecs = fs.embed_cached(texts, "passage")
    mixed = ds.Bank("mixed XQuAD-R", np.arange(n), vecs, langs, [False] * n, texts, langs,
                    [False] * n)
    pos = {d: i for i, d in enumerate(ids)}
    mq = []
    for qlang, src in (("zh", zh), ("en", en_q)):
        for qid, text in src.queries.items():
            gold = src.qrels.get(qid, {})
            if gold:
                glang = mixed_lang(_article(next(iter(gold))))
                mq.append(ds.Query(qid, text, {pos[d] for d in gold if d in pos}, "all",
                                   (f"{qlang}>{glang}",)))
    return mixed, mq, {}


def _runs(corpus: fs.Corpus, qids, qtexts, bg) -> list[fs.QueryRun]:
    """Both legs per query, the dense leg taking its candidates per language group."""
    return fs.run_legs(corpus, qids, qtexts, bg, k=CANDIDATES)


def _r5(corpus: fs.Corpus, runs, qlang, qrels, gold_lang, method) -> dict[str, float]:
    scores: dict[str, list[float]] = {}
    for run in runs:
        gold = qrels[run.query_id]
        ranked = [corpus.ids[i] for i in method(run, corpus)]
        pair = f"{qlang}>{gold_lang(gold)}"
        scores.setdefault(pair, []).append(recall_at(ranked, gold, 5))
    return {p: round(float(np.mean(v)), 3) for p, v in scores.items()}


def _ranked(run: fs.QueryRun, corpus: fs.Corpus, params=None) -> list[int]:
    """The recall service's ranking score (`fusion.raw_scores` with the language cohorts)."""
    from factbank.read.fusion import DEFAULT, Candidates, cohort_means, raw_scores

    params = params or DEFAULT
    langs, tagged = dict(enumerate(corpus.langs)), dict(enumerate(corpus.tagged))
    scored = raw_scores(
        Candidates(run.lexical, run.dense, run.query_terms, run.query_lang, langs, tagged,
                   run.background),
        params,
        cohort=cohort_means(run.dense, langs, params, tagged) if run.dense else None,
    )
    return [f for f, _ in scored]


def measure(data: Path, params=None) -> dict:
    """R@5 per pair: single-language bank (hybrid), mixed bank (hybrid, dense, plain cosine)."""
    zh = beir.load(data / "xquad-r-zh2zh")
    en = beir.load(data / "xquad-r-zh2en")
    en_q = beir.load(data / "xquad-r-en2zh")
    bg = fs.background_vectors()
    banks = {
        "mixed": _bank(zh, en, mixed_lang),
        "zh": _bank(zh, en, lambda a: "zh"),
        "en": _bank(zh, en, lambda a: "en"),
    }
    queries = {"zh": (zh.query_ids, zh.query_texts, zh.qrels),
               "en": (en_q.query_ids, en_q.query_texts, en_q.qrels)}

    def hybrid(run, corpus):
        return _ranked(run, corpus, params)

    def dense(run, corpus):
        return _ranked(replace(run, lexical=[]), corpus, params)

    def cosine(run, corpus):
        return [h.fact_id for h in sorted(run.dense, key=lambda h: (-h.score, h.fact_id))]

    table: dict[str, dict[str, float]] = {p: {} for p in PAIRS}
    for qlang, (qids, qtexts, qrels) in queries.items():
        for name, (ids, texts, langs) in banks.items():
            corpus = fs.index_corpus(ids, texts, langs=langs)
            runs = _runs(corpus, qids, qtexts, bg)

            def gold_lang(gold, bank=name):
                return mixed_lang(_article(next(iter(gold)))) if bank == "mixed" else bank

            methods = {"hybrid": hybrid}
            if name == "mixed":
                methods |= {"dense": dense, "cosine": cosine}
            for method, fn in methods.items():
                for pair, v in _r5(corpus, runs, qlang, qrels, gold_lang, fn).items():
                    col = "single" if name != "mixed" else f"mixed {method}"
                    if name == "mixed" or pair.split(">")[1] == name:
                        table[pair][col] = v
    return {"candidates_per_group": CANDIDATES, "pairs": table}


def format_table(result: dict) -> str:
    cols = ("single", "mixed hybrid", "mixed dense", "mixed cosine")
    lines = [
        "| pair (query>fact) | single-language bank, hybrid | mixed bank, hybrid | "
        "mixed, dense | mixed, plain cosine |",
        "|---|---|---|---|---|",
    ]
    for pair, row in result["pairs"].items():
        lines.append(f"| {pair} | " + " | ".join(f"{row.get(c, float('nan')):.3f}"
                                                 for c in cols) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m factbank_evals.mixed_banks",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not (args.data / "xquad-r-zh2zh").is_dir():
        ap.error(f"no XQuAD-R dev sets under {args.data}")
    result = measure(args.data)
    print(json.dumps(result, indent=1) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
