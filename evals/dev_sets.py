"""The product's ranking against the plain references, in memory, on every dev set.

Why this exists: a change to centring, candidates or cohorts must never leave the product's
dense mode below exact plain cosine of the same embedder, nor hybrid below a plain RRF of BM25
and that cosine, on any single-language set, and must keep the cross-language gains of the
mixed banks. Through HTTP (`factbank eval all`) that takes half an hour here; this runs the
same ranking code in a minute once the embeddings are cached (/tmp/factbank-fusion-cache), so
each variant can be measured on every set before it reaches the services.

What runs, per set:
- `bm25`: rank_bm25's Okapi over the product's tokens (the Postgres BM25 equals it:
  tests/integration/test_bm25.py);
- `cosine`: exact plain cosine over every vector, a fact at its best vector (no index);
- `rrf`: plain reciprocal rank fusion (k=5) of those two, top 50 of each;
- `dense`, `hybrid`: the recall service's ranking (`fusion.raw_scores` with the language
  cohorts, as `search._rank` calls it) on the service's candidates (the 50 nearest vectors
  per language group) with each vector's `en_share`; `--labels` gives every vector
  `en_share=None`, the former ranking (the text's label decides its language).

Sets: every BEIR folder under `--data` and the agent-memory set saved bare, with tags, with
questions and with both (`--configs`): each fact's own vector (content + tags, as saved) and
one per writer question; a superseded hit stands for its successor, as recall does.

    python -m factbank_evals.dev_sets --data ../shared/evaldata [--labels] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from factbank_evals import beir
from factbank_evals import fusion_sweep as fs
from factbank_evals.metrics import recall_at

CANDIDATES = 50  # per language group, as search.CANDIDATES
METHODS = ("bm25", "cosine", "rrf", "dense", "hybrid")
AM_CONFIGS = ("bare", "tags", "questions", "tags+questions", "half-questions")


@dataclass(frozen=True)
class Bank:
    """Vectors of a bank (several per fact), what BM25 indexes per fact, and labels."""

    name: str
    vec_fact: np.ndarray  # fact index of each vector
    vecs: np.ndarray
    vec_lang: list[str]
    vec_question: list[bool]
    lexical_texts: list[str]
    fact_lang: list[str]
    fact_tagged: list[bool]


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    answers: set[int]
    kind: str = "all"
    splits: tuple[str, ...] = ()  # further splits it counts in ("paraphrase zh", ...)


def _bank(name, vec_fact, texts_of_vectors, questions, lexical_texts, fact_lang, tagged) -> Bank:
    from factbank.text.tokenizer import language

    return Bank(name, np.asarray(vec_fact), fs.embed_cached(texts_of_vectors, "passage"),
                [language(t) for t in texts_of_vectors], questions, lexical_texts, fact_lang,
                tagged)


def beir_bank(s: beir.BeirSet) -> tuple[Bank, list[Query], dict[int, int]]:
    from factbank.text.tokenizer import language

    texts = s.doc_texts
    bank = _bank(s.name, range(len(texts)), texts, [False] * len(texts), texts,
                 [language(t) for t in texts], [False] * len(texts))
    pos = {d: i for i, d in enumerate(s.doc_ids)}
    queries = [Query(q, t, {pos[d] for d in s.qrels.get(q, ()) if d in pos})
               for q, t in s.queries.items()]
    return bank, [q for q in queries if q.answers], {}


def agent_memory_bank(config: str) -> tuple[Bank, list[Query], dict[int, int]]:
    """The agent-memory set saved as `config`: vectors as the service embeds them
    (`lexicon.indexed_text`, one per question), BM25 text as it indexes it. Paraphrase and
    crosslingual queries also count in a split by their own language ("paraphrase en").

    "half-questions" is the bank a real one becomes when imported or migrated facts (bare)
    sit beside facts an agent saved with questions: the odd facts keep their writer
    questions, the even ones have only their own vector; its paraphrase and crosslingual
    queries also count by their gold ("paraphrase, bare gold")."""
    from factbank.text.lexicon import indexed_text, lexical_text
    from factbank.text.tokenizer import language
    from factbank_evals import agent_memory as am

    if config == "half-questions":
        facts, _ = am.load_set(am.SET_DIR, "questions")
        lexical = [lexical_text(f["content"], f["tags"], f["questions"] if i % 2 else [])
                   for i, f in enumerate(facts)]
        return _half_questions(*agent_memory_bank("questions"), lexical)

    facts, cases = am.load_set(am.SET_DIR, config)
    pos = {f["id"]: i for i, f in enumerate(facts)}
    vec_fact, texts, question = [], [], []
    for i, f in enumerate(facts):
        for n, text in enumerate([indexed_text(f["content"], f["tags"]), *f["questions"]]):
            vec_fact.append(i)
            texts.append(text)
            question.append(n > 0)
    bank = _bank(f"agent-memory ({config})", vec_fact, texts, question,
                 [lexical_text(f["content"], f["tags"], f["questions"]) for f in facts],
                 [language(f["content"]) for f in facts], [bool(f["tags"]) for f in facts])
    queries = [Query(c.id, c.text, {pos[a] for a in c.answers}, c.kind,
                     (f"{c.kind} {language(c.text)}",) if c.kind in SPLIT_KINDS else ())
               for c in cases if c.answers]
    successor = {pos[f["supersedes"]]: pos[f["id"]] for f in facts if f.get("supersedes")}
    return bank, queries, successor


SPLIT_KINDS = ("paraphrase", "crosslingual")


def _half_questions(bank: Bank, queries: list[Query], successor: dict[int, int],
                    lexical_texts: list[str]):
    """The questions bank with the writer questions of every even fact dropped (from its
    vectors and from what BM25 indexes: `lexical_texts`)."""
    keep = np.array([not q or int(f) % 2 == 1 for f, q in zip(bank.vec_fact, bank.vec_question,
                                                              strict=True)])
    half = Bank("agent-memory (half-questions)", bank.vec_fact[keep], bank.vecs[keep],
                [x for x, k in zip(bank.vec_lang, keep, strict=True) if k],
                [x for x, k in zip(bank.vec_question, keep, strict=True) if k],
                lexical_texts, bank.fact_lang, bank.fact_tagged)
    out = []
    for q in queries:
        gold = "bare gold" if all(a % 2 == 0 for a in q.answers) else "gold with questions"
        extra = (f"{q.kind}, {gold}",) if q.kind in SPLIT_KINDS else ()
        out.append(Query(q.id, q.text, q.answers, q.kind, q.splits + extra))
    return half, out, successor


@dataclass(frozen=True)
class Legs:
    """One query's candidates as the recall service builds them, and the plain cosine order."""

    qtoks: list[str]
    lexical: list  # LegHit per fact, BM25 order, at most CANDIDATES with a query term
    dense: list  # LegHit per vector, the CANDIDATES nearest of each language group
    plain: list[int]  # exact, every vector, a fact at its best
    background: object  # fusion.Background of the query


def query_legs(bank: Bank, queries: Sequence[Query], qvecs: np.ndarray, bg, *,
               labels: bool = False, scan: int | None = None) -> Iterator[Legs]:
    """Each query's legs, in the order of `queries`.

    Why one function: the dev sets and the dated report scripts beside them must rank the
    very same candidates, or their tables stop being comparable. `scan` bounds how many BM25
    hits are looked at for a query term (None: all; a report script kept its own bound)."""
    from rank_bm25 import BM25Okapi

    from factbank.read.fusion import Background, LegHit, label_share
    from factbank.text.tokenizer import tokenize

    shares = bg.en_shares(bank.vecs)
    # With `labels` the hub figure takes the label's share, as the service does without an axis.
    hubs = bg.hubs(bank.vecs, [label_share(lang) for lang in bank.vec_lang] if labels else shares)
    toks = [tokenize(t) for t in bank.lexical_texts]
    bm25 = BM25Okapi([t if t else [""] for t in toks])
    token_sets = [set(t) for t in toks]
    langs = np.array(bank.vec_lang)
    groups = [g for g in (np.where(langs == "zh")[0], np.where(langs != "zh")[0]) if g.size]
    for qi, q in enumerate(queries):
        qtoks = tokenize(q.text)
        lexical: list = []
        if qtoks:
            scores = np.asarray(bm25.get_scores(qtoks))
            for d in np.argsort(-scores, kind="stable")[:scan]:
                if len(lexical) >= CANDIDATES:
                    break
                if matched := len(set(qtoks) & token_sets[d]):
                    lexical.append(LegHit(int(d), float(scores[d]), matched))
        cos = bank.vecs @ qvecs[qi]
        best: dict[int, float] = {}
        for v in np.argsort(-cos, kind="stable"):
            best.setdefault(int(bank.vec_fact[v]), float(cos[v]))
        top = sorted(np.concatenate([g[np.argsort(-cos[g], kind="stable")[:CANDIDATES]]
                                     for g in groups]).tolist(), key=lambda v: (-cos[v], v))
        dense = [LegHit(int(bank.vec_fact[v]), float(cos[v]), lang=bank.vec_lang[v],
                        form="question" if bank.vec_question[v] else None,
                        en_share=None if labels else float(shares[v]),
                        hub=float(hubs[v])) for v in top]
        yield Legs(qtoks, lexical, dense, list(best), Background.for_query(qvecs[qi], bg))


def rankings(bank: Bank, queries: Sequence[Query], successor: dict[int, int], *,
             labels: bool = False, params=None) -> dict[str, list[list[int]]]:
    """Every method's ranking (fact indices, best first) of every query."""
    from factbank.read.fusion import DEFAULT, Candidates, LegHit, cohort_means, raw_scores
    from factbank.text.tokenizer import language

    params = params or DEFAULT
    bg = fs.background_vectors()
    qvecs = fs.embed_cached([q.text for q in queries], "query")
    doc_lang = dict(enumerate(bank.fact_lang))
    doc_tagged = dict(enumerate(bank.fact_tagged))

    def redirect(ranked: list[int]) -> list[int]:
        return redirected(ranked, successor)

    out: dict[str, list[list[int]]] = {m: [] for m in METHODS}
    legs = query_legs(bank, queries, qvecs, bg, labels=labels)
    for q, leg in zip(queries, legs, strict=True):
        qtoks, lexical, dense, plain, background = (leg.qtoks, leg.lexical, leg.dense,
                                                    leg.plain, leg.background)
        cohort = cohort_means(dense, doc_lang, params, doc_tagged)
        for method, lex in (("dense", []), ("hybrid", lexical)):
            c = Candidates(lex, dense, len(set(qtoks)), language(q.text), doc_lang,
                           doc_tagged, background)
            out[method].append(redirect([f for f, _ in raw_scores(c, params, cohort=cohort)]))
        out["bm25"].append(redirect([h.fact_id for h in lexical]))
        out["cosine"].append(redirect(plain))
        out["rrf"].append(redirect(fs.rrf(lexical, [LegHit(f, 0.0) for f in plain[:CANDIDATES]])))
    return out


def redirected(ranked: list[int], successor: dict[int, int]) -> list[int]:
    """A ranking with each superseded fact standing for its successor, as recall does."""
    return [f for f, _ in fs.redirect([(f, -i) for i, f in enumerate(ranked)], successor)]


def r5_by_split(queries: Iterable[Query], ranked: Iterable[list[int]],
                successor: dict[int, int]) -> dict[str, float]:
    """Mean R@5 of each query's ranking (redirected), overall, per kind and per split, not
    rounded. Why here: the dated report scripts score their rankings this one way, so their
    tables agree with each other."""
    acc: dict[str, list[float]] = {}
    for q, r in zip(queries, ranked, strict=True):
        r = redirected(r, successor)
        for k in {"all", q.kind, *q.splits}:
            acc.setdefault(k, []).append(recall_at(r, q.answers, 5))
    return {k: float(np.mean(x)) for k, x in acc.items()}


def r5_by_kind(queries: Sequence[Query], ranked: dict[str, list[list[int]]]) -> dict:
    """R@5 per method, overall and per query kind."""
    out: dict[str, dict[str, float]] = {}
    kinds = sorted({q.kind for q in queries} | {s for q in queries for s in q.splits})
    for m, lists in ranked.items():
        row = {}
        for k in ("all", *[k for k in kinds if k != "all"]):
            vals = [recall_at(r, q.answers, 5) for q, r in zip(queries, lists, strict=True)
                    if k == "all" or q.kind == k or k in q.splits]
            row[k] = round(float(np.mean(vals)), 3)
        out[m] = row
    return out


def measure(data: Path | None, configs: Sequence[str], *, labels: bool = False,
            sets: Sequence[str] | None = None, params=None) -> dict:
    loaders: list[tuple[str, Callable]] = []
    if data is not None:
        for folder in sorted(p for p in data.iterdir() if p.is_dir() and beir.is_beir(p)):
            if sets is None or folder.name in sets:
                loaders.append((folder.name, lambda f=folder: beir_bank(beir.load(f))))
    loaders += [(f"agent-memory ({c})", lambda c=c: agent_memory_bank(c)) for c in configs]
    result = {}
    for name, load in loaders:
        bank, queries, successor = load()
        result[name] = r5_by_kind(queries, rankings(bank, queries, successor, labels=labels,
                                                             params=params))
    return {"labels": labels, "sets": result}


def format_table(result: dict) -> str:
    lines = ["| set | split | " + " | ".join(METHODS) + " |", "|---|---|" + "---|" * len(METHODS)]
    for name, rows in result["sets"].items():
        for split in rows["cosine"]:
            if split == "all" or name.startswith("agent-memory"):
                cells = " | ".join(f"{rows[m][split]:.3f}" for m in METHODS)
                lines.append(f"| {name} | {split} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m factbank_evals.dev_sets",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    ap.add_argument("--configs", default=",".join(AM_CONFIGS),
                    help="agent-memory configurations (comma-separated; empty: none)")
    ap.add_argument("--sets", default=None, help="only these BEIR folders (comma-separated)")
    ap.add_argument("--labels", action="store_true",
                    help="the text's label decides each vector's language (the former ranking)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    unknown = set(configs) - set(AM_CONFIGS)
    if unknown:
        ap.error(f"unknown config(s) {sorted(unknown)}")
    data = args.data if args.data.is_dir() else None
    result = measure(data, configs, labels=args.labels,
                     sets=args.sets.split(",") if args.sets else None)
    print(json.dumps(result, indent=1) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
