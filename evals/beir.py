"""`factbank eval beir PATH`: any BEIR-layout set through the real recall service.

Loads corpus.jsonl into a throwaway bank (one JSONL import: one transaction; each document is
its own fact, scoped to its own project key so near-identical sentences stay separate facts),
runs every query of queries.jsonl through `POST /v1/search` in three modes and scores them
against qrels.tsv: R@5, MRR@10, nDCG@10, p50/p95 latency (client-side, over HTTP), for
lexical-only, dense-only and hybrid, plus hybrid with the floor (what an agent is shown).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import httpx
from tqdm import tqdm

from factbank_evals import metrics
from factbank_evals.stack import Stack, timed_post

MODES = ("lexical", "dense", "hybrid")
IMPORT_CHUNK = 1000  # the ingest service takes at most 1,000 facts per import (MAX_IMPORT_LINES)


@dataclass(frozen=True)
class BeirSet:
    """A BEIR-layout set: the corpus and the judged queries (id -> text, in file order) and, per
    query, the ids of its relevant documents."""

    name: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, set[str]]

    @property
    def doc_ids(self) -> list[str]:
        return list(self.corpus)

    @property
    def doc_texts(self) -> list[str]:
        return list(self.corpus.values())

    @property
    def query_ids(self) -> list[str]:
        return list(self.queries)

    @property
    def query_texts(self) -> list[str]:
        return list(self.queries.values())


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _score(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_qrels(path: Path) -> dict[str, set[str]]:
    """qrels.tsv (query-id, corpus-id, score): the documents with a score above 0, per query.

    The first line is a header when its score is not a number, whatever its column names;
    scores may be integers or graded floats ("1", "0.5"); 0 and negative scores are judged
    not relevant. Any later line whose score is not a number is an error naming the line.
    """
    qrels: dict[str, set[str]] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) < 3:
                continue
            score = _score(parts[2])
            if score is None:
                if n == 1:
                    continue  # the header
                raise ValueError(f"{path}:{n}: score {parts[2]!r} is not a number")
            if score > 0:
                qrels.setdefault(parts[0], set()).add(parts[1])
    return qrels


def load(path: Path) -> BeirSet:
    """corpus.jsonl, queries.jsonl and qrels.tsv; only judged queries are kept.

    A document is its text alone (no title): a stored fact has no title, and the XQuAD-R
    titles are English even in the Chinese corpus, which would leak an English anchor into
    the cross-lingual lexical leg.
    """
    path = Path(path)
    qrels = read_qrels(path / "qrels.tsv")
    corpus = {str(d["_id"]): d["text"] for d in read_jsonl(path / "corpus.jsonl")}
    queries = {str(q["_id"]): q["text"] for q in read_jsonl(path / "queries.jsonl")
               if str(q["_id"]) in qrels}
    return BeirSet(path.name, corpus, queries, qrels)


def is_beir(path: Path) -> bool:
    return all((path / f).is_file() for f in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"))


def load_corpus(
    http: httpx.Client, stack: Stack, data: BeirSet, *, progress: bool = True
) -> dict[int, str]:
    """Import the corpus; returns fact id -> corpus id."""
    ids = list(data.corpus)
    by_fact: dict[int, str] = {}
    bar = tqdm(total=len(ids), desc=f"load {data.name}", unit="doc", disable=not progress)
    for start in range(0, len(ids), IMPORT_CHUNK):
        chunk = ids[start : start + IMPORT_CHUNK]
        body = "\n".join(
            json.dumps(
                {
                    "content": data.corpus[d][:4000],
                    "category": "reference",
                    "source": {"kind": "doc", "location": f"{data.name}/{d}"},
                    "quote": data.corpus[d][:2000],
                    "origin": "verified",
                    "project": f"doc:{d}",
                },
                ensure_ascii=False,
            )
            for d in chunk
        )
        r = http.post(stack.ingest + "/v1/facts/import", content=body.encode())
        if r.status_code != 201:
            raise RuntimeError(f"import of {data.name} refused: {r.text[:2000]}")
        for d, outcome in zip(chunk, r.json()["results"], strict=True):
            by_fact[outcome["fact"]["id"]] = d
        bar.update(len(chunk))
    bar.close()
    return by_fact


def search(
    http: httpx.Client, stack: Stack, query: str, mode: str, floor: bool, limit: int = 10
) -> tuple[list[dict], float]:
    """`POST /v1/search`: its results and the wall time in ms."""
    body, ms = timed_post(http, stack.recall + "/v1/search",
                          {"query": query, "mode": mode, "limit": limit, "floor": floor})
    return body["results"], ms


def run_queries(
    http: httpx.Client,
    stack: Stack,
    data: BeirSet,
    by_fact: dict[int, str],
    *,
    progress: bool = True,
    max_queries: int | None = None,
) -> dict:
    """Per mode: summary metrics, plus top relevance of each query (for floor calibration)."""
    queries = list(data.queries.items())[:max_queries]
    runs = [(m, False) for m in MODES] + [("hybrid", True)]
    per: dict[str, list[dict]] = {f"{m}{'+floor' if f else ''}": [] for m, f in runs}
    top_relevance: list[float] = []
    bar = tqdm(
        total=len(queries) * len(runs), desc=f"query {data.name}", unit="q", disable=not progress
    )
    for qid, text in queries:
        for mode, floor in runs:
            hits, ms = search(http, stack, text, mode, floor)
            ranked = [by_fact.get(h["fact"]["id"], "?") for h in hits]
            per[f"{mode}{'+floor' if floor else ''}"].append(
                metrics.score(ranked, data.qrels[qid], ms)
            )
            if mode == "hybrid" and not floor:
                top_relevance.append(hits[0]["relevance"] if hits else 0.0)
            bar.update()
    bar.close()
    return {
        "summary": {k: metrics.summarize(v) for k, v in per.items()},
        "top_relevance": top_relevance,
    }


def refusal(
    http: httpx.Client, stack: Stack, queries: dict[str, str], *, progress: bool = True
) -> dict:
    """Queries whose answer is not in the bank: how many return nothing (hybrid + floor)."""
    empty, tops = 0, []
    for text in tqdm(list(queries.values()), desc="unanswerable", unit="q", disable=not progress):
        hits, _ = search(http, stack, text, "hybrid", True, limit=5)
        empty += not hits
        raw, _ = search(http, stack, text, "hybrid", False, limit=1)
        tops.append(raw[0]["relevance"] if raw else 0.0)
    return {
        "queries": len(queries),
        "refused": empty,
        "refusal_rate": round(empty / len(queries), 3) if queries else None,
        "top_relevance": tops,
    }


def format_table(rows: list[dict]) -> str:
    head = "| set | mode | R@5 | MRR@10 | nDCG@10 | p50 ms | p95 ms |"
    out = [head, "|---|---|---|---|---|---|---|"]
    for row in rows:
        for mode, s in row["summary"].items():
            out.append(
                f"| {row['set']} | {mode} | {s['r@5']:.3f} | {s['mrr@10']:.3f} | "
                f"{s['ndcg@10']:.3f} | {s['p50_ms']} | {s['p95_ms']} |"
            )
    return "\n".join(out)
