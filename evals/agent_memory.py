"""The agent-memory eval: our own zh/en set, every method, one run
(docs/principles.md#benchmarks-must-be-hard).

What it measures, and how:

- Ingest is the real one. Facts without `supersedes` go in through one `POST /v1/facts/import`
  (one transaction); a fact that supersedes another is then written with
  `POST /v1/facts/supersede` after its predecessor, in dependency order, so the bank holds the
  history as an agent would have built it (docs/principles.md#supersede-keeps-history) and
  chronology is real.
- Every query runs through every method: the grep control (`grep_control`), BM25 only
  (`mode=lexical`), dense only, hybrid without the floor, hybrid with the floor (what an agent
  is given), and the real prompt injection (`POST /v1/inject`) for the token cost.
- Scores: R@5, MRR@10, nDCG@10 on answerable queries (a query that returns nothing scores 0:
  a wrong refusal is a miss), R@5 per query kind, refusal precision and recall (refusal
  queries: the right result is nothing), the stale-answer rate of chronology queries (a
  superseded fact in the top 5, or injected), tokens per query, p50/p95 latency.

The method runner (`run_methods`) works on any labelled cases, so `run_all` also feeds it the
public BEIR sets; only the agent-memory set has kinds, stale facts and in-set refusals.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec
from tqdm import tqdm

from factbank_evals import beir, metrics
from factbank_evals.beir import read_jsonl
from factbank_evals.grep_control import GrepControl, line_for
from factbank_evals.stack import Stack, timed_post

SET_DIR = Path(__file__).parent / "sets" / "agent-memory"
# Order matters: the agent's path runs first, so it alone pays the cold query embedding; the
# service caches the embedding by text, so later modes of the same query find it cached.
SERVER_METHODS = (
    ("hybrid+floor", "hybrid", True),
    ("hybrid", "hybrid", False),
    ("dense", "dense", False),
    ("bm25", "lexical", False),
)
# `cosine` and `rrf` are the plain references (`plain.py`): exact cosine of the same embedder
# over the bank's stored vectors, and RRF (k=5) of BM25 and that cosine.
METHODS = ("grep", "cosine", "rrf", "bm25", "dense", "hybrid", "hybrid+floor")
# What each fact carries when it is saved: the four configurations compared. The
# default is what the instruction block asks every writer for: tags and questions.
CONFIGS = {
    "bare": (False, False),
    "tags": (True, False),
    "questions": (False, True),
    "tags+questions": (True, True),
}
DEFAULT_CONFIG = "tags+questions"
REFUSAL_KINDS = ("refusal",)
LIMIT = 10


@dataclass
class Case:
    id: str
    text: str
    kind: str
    lang: str = ""
    answers: set[str] = field(default_factory=set)
    stale: set[str] = field(default_factory=set)
    hard_negatives: set[str] = field(default_factory=set)

    @property
    def answerable(self) -> bool:
        return bool(self.answers)


@dataclass
class Loaded:
    """What ingest built: server fact id -> the set ids it stands for, and what happened."""

    by_fact: dict[int, list[str]]
    stored: int = 0
    reinforced: int = 0
    superseded: int = 0
    merged: list[tuple[str, str]] = field(default_factory=list)  # (set id, merged into)


def load_set(
    path: Path = SET_DIR, config: str = DEFAULT_CONFIG
) -> tuple[list[dict], list[Case]]:
    """The facts as this configuration saves them (tags and/or writer questions kept or
    dropped; questions from `questions.jsonl`, written from the facts alone) and the cases."""
    with_tags, with_questions = CONFIGS[config]
    facts = read_jsonl(path / "facts.jsonl")
    questions = {}
    if with_questions and (path / "questions.jsonl").is_file():
        questions = {r["id"]: r["questions"] for r in read_jsonl(path / "questions.jsonl")}
    facts = [
        {**f, "tags": f.get("tags") if with_tags else [], "questions": questions.get(f["id"], [])}
        for f in facts
    ]
    cases = [
        Case(
            q["id"],
            q["text"],
            q["kind"],
            q.get("lang", ""),
            set(q.get("answers") or ()),
            set(q.get("stale") or ()),
            set(q.get("hard_negatives") or ()),
        )
        for q in read_jsonl(path / "queries.jsonl")
    ]
    return facts, cases


def subset(cases: Sequence[Case], per_kind: int) -> list[Case]:
    """The first `per_kind` cases of each kind (for smoke runs)."""
    counts: dict[str, int] = {}
    out = []
    for c in cases:
        if counts.get(c.kind, 0) < per_kind:
            counts[c.kind] = counts.get(c.kind, 0) + 1
            out.append(c)
    return out


def needed_facts(facts: Sequence[dict], cases: Sequence[Case]) -> list[dict]:
    """Only the facts these cases name (answers, stale, hard negatives) and their
    predecessors, in set order: a small but still adversarial bank for smoke runs."""
    by_id = {f["id"]: f for f in facts}
    want: set[str] = set()
    todo = [x for c in cases for x in (*c.answers, *c.stale, *c.hard_negatives)]
    while todo:
        fid = todo.pop()
        if fid in want or fid not in by_id:
            continue
        want.add(fid)
        if by_id[fid].get("supersedes"):
            todo.append(by_id[fid]["supersedes"])
    return [f for f in facts if f["id"] in want]


def _body(fact: dict) -> dict:
    source = (
        {"kind": "user", "location": "user said"}
        if fact.get("origin") == "user"
        else {"kind": "doc", "location": f"agent-memory/facts.jsonl#{fact['id']}"}
    )
    return {
        "content": fact["content"],
        "category": fact["category"],
        "tags": fact.get("tags") or [],
        "questions": fact.get("questions") or [],
        "source": source,
        "quote": fact["content"],
        "origin": fact.get("origin") or "inferred",
        "project": fact.get("project"),
        "agent": "eval",
    }


def write_order(facts: Sequence[dict]) -> list[dict]:
    """Facts in an order where every predecessor comes before the fact that supersedes it."""
    by_id = {f["id"]: f for f in facts}
    done: set[str] = set()
    out: list[dict] = []

    def visit(f: dict, path: frozenset[str]) -> None:
        if f["id"] in done:
            return
        if f["id"] in path:
            raise ValueError(f"supersede cycle through {f['id']}")
        prev = f.get("supersedes")
        if prev:
            if prev not in by_id:
                raise ValueError(f"{f['id']} supersedes unknown fact {prev}")
            visit(by_id[prev], path | {f["id"]})
        done.add(f["id"])
        out.append(f)

    for f in facts:
        visit(f, frozenset())
    return out


def ingest(http: httpx.Client, stack: Stack, facts: Sequence[dict]) -> Loaded:
    """Import the plain facts in one transaction, then supersede in dependency order."""
    loaded = Loaded(by_fact={})
    server_id: dict[str, int] = {}

    def record(set_id: str, outcome: dict) -> None:
        fid = outcome["fact"]["id"]
        if outcome["status"] == "reinforced":
            loaded.reinforced += 1
            loaded.merged.append((set_id, loaded.by_fact[fid][0]))
        else:
            loaded.stored += 1
        server_id[set_id] = fid
        loaded.by_fact.setdefault(fid, []).append(set_id)

    plain = [f for f in facts if not f.get("supersedes")]
    body = "\n".join(json.dumps(_body(f), ensure_ascii=False) for f in plain)
    r = http.post(stack.ingest + "/v1/facts/import", content=body.encode())
    if r.status_code != 201:
        raise RuntimeError(f"import refused: {r.text[:2000]}")
    for f, outcome in zip(plain, r.json()["results"], strict=True):
        record(f["id"], outcome)
    for f in write_order(facts):
        if not f.get("supersedes"):
            continue
        r = http.post(
            stack.ingest + "/v1/facts/supersede",
            json={
                "fact": _body(f),
                "replaces": [server_id[f["supersedes"]]],
                "reason": f.get("reason") or "superseded",
            },
        )
        if r.status_code != 201:
            raise RuntimeError(f"supersede of {f['supersedes']} by {f['id']} refused: {r.text}")
        record(f["id"], r.json())
        loaded.superseded += 1
    return loaded


def grep_entries(facts: Sequence[dict]) -> list[tuple[str, str]]:
    """The grep control's notes file: one line per fact, in write order."""
    return [
        (f["id"], line_for(f["content"], [*(f.get("tags") or ()), *(f.get("questions") or ())]))
        for f in write_order(facts)
    ]


# --- running the methods -------------------------------------------------------------------


def _fact_struct(fact: dict):
    from factbank.models import Fact

    return msgspec.convert(fact, Fact, strict=False)


def block_tokens(hits: Sequence[dict], top: int = 5) -> int:
    """Tokens of the prompt block an injection of these hits would be (same code as inject)."""
    from factbank.read import inject

    lines = [(h["fact"]["id"], inject.line_for(_fact_struct(h["fact"]))) for h in hits[:top]]
    return inject.assemble(lines, inject.PROMPT_BUDGET, "eval").tokens if lines else 0


def _labels(ids: Sequence[int], by_fact: dict[int, list[str]]) -> list[list[str]]:
    return [by_fact.get(i, ["?"]) for i in ids]


def _record(case: Case, labels: list[list[str]], ms: float, tokens: int, **extra) -> dict:
    ranked = [next((x for x in ids if x in case.answers), ids[0]) for ids in labels]
    rec = {
        "q": case.id,
        "kind": case.kind,
        "ranked": ranked[:LIMIT],
        "refused": not labels,
        "stale@5": any(x in case.stale for ids in labels[:5] for x in ids),
        "ms": round(ms, 2),
        "tokens": tokens,
    }
    if case.answerable:
        rec.update(metrics.score(ranked, case.answers, ms))
        rec["ms"] = round(ms, 2)
        # Of what was returned in the top 5, the share that answers (None: nothing returned).
        top = labels[:5]
        rec["precision@5"] = (
            round(sum(any(x in case.answers for x in ids) for ids in top) / len(top), 3)
            if top
            else None
        )
    rec.update(extra)
    return rec


def _inject(http: httpx.Client, stack: Stack, text: str) -> tuple[dict, float]:
    return timed_post(http, stack.recall + "/v1/inject",
                      {"kind": "prompt", "session_id": "eval-" + uuid.uuid4().hex, "prompt": text})


def run_methods(
    http: httpx.Client,
    stack: Stack,
    cases: Sequence[Case],
    by_fact: dict[int, list[str]],
    grep: GrepControl,
    *,
    inject: bool = True,
    progress: bool = True,
    desc: str = "queries",
    tick: Callable[[], None] | None = None,
) -> dict[str, list[dict]]:
    """Every case through every method; returns per-method per-query records."""
    from factbank_evals import plain as plain_refs

    out: dict[str, list[dict]] = {m: [] for m in METHODS}
    if inject:
        out["inject"] = []
    exact = plain_refs.ExactCosine(stack)
    for case in tqdm(cases, desc=desc, unit="q", disable=not progress, leave=False):
        for name, mode, floor in SERVER_METHODS:
            hits, ms = beir.search(http, stack, case.text, mode, floor, limit=LIMIT)
            extra = {}
            if name == "hybrid":
                extra["top_relevance"] = round(hits[0]["relevance"], 4) if hits else 0.0
            if name == "hybrid+floor" and hits:
                extra["min_relevance"] = round(min(h["relevance"] for h in hits), 4)
            labels = _labels([h["fact"]["id"] for h in hits], by_fact)
            out[name].append(_record(case, labels, ms, block_tokens(hits), **extra))
            if name == "bm25":
                # The plain references: exact cosine, and RRF k=5 of it with BM25's top 50.
                t0 = time.perf_counter()
                cos_ids = exact.ranked(case.text)
                ms = (time.perf_counter() - t0) * 1000
                out["cosine"].append(_record(case, _labels(cos_ids[:LIMIT], by_fact), ms, 0))
                lex50, lms = beir.search(http, stack, case.text, "lexical", False, limit=50)
                fused = plain_refs.rrf([h["fact"]["id"] for h in lex50], cos_ids)
                out["rrf"].append(_record(case, _labels(fused[:LIMIT], by_fact), ms + lms, 0))
            if name == "hybrid+floor" and inject:
                block, ims = _inject(http, stack, case.text)
                ilabels = _labels(block["facts"], by_fact)
                out["inject"].append(_record(case, ilabels, ims, block["tokens"]))
        g = grep.search(case.text)
        out["grep"].append(
            _record(case, [[k] for k in g.ranked], g.ms, g.tokens, patterns=g.patterns)
        )
        if tick:
            tick()
    return out


# --- scoring -------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def summarize(records: Sequence[dict]) -> dict:
    """One method's numbers: accuracy on answerable cases, refusals, staleness, cost, speed."""
    answerable = [r for r in records if "r@5" in r]
    unanswerable = [r for r in records if "r@5" not in r]
    refused = [r for r in records if r["refused"]]
    refused_right = [r for r in unanswerable if r["refused"]]
    with_stale = [r for r in records if r["kind"] == "chronology"]
    kinds = sorted({r["kind"] for r in answerable})
    lat = [r["ms"] for r in records]
    return {
        "queries": len(records),
        "answerable": len(answerable),
        "r@5": _mean([r["r@5"] for r in answerable]),
        "mrr@10": _mean([r["mrr@10"] for r in answerable]),
        "ndcg@10": _mean([r["ndcg@10"] for r in answerable]),
        "r@5_by_kind": {k: _mean([r["r@5"] for r in answerable if r["kind"] == k]) for k in kinds},
        # Of the answerable queries that got anything, the share of returned top-5 facts that
        # answer (for inject: of the injected facts, the share that are gold).
        "precision@5": _mean(
            [r["precision@5"] for r in answerable if r.get("precision@5") is not None]
        ),
        "answered_with_gold": _mean([r["r@5"] > 0 for r in answerable]),
        "unanswerable_given_anything": _mean([not r["refused"] for r in unanswerable]),
        "unanswerable": len(unanswerable),
        "refusal_recall": _mean([r["refused"] for r in unanswerable]),
        "refusal_precision": round(len(refused_right) / len(refused), 3) if refused else None,
        "wrong_refusals": _mean([r["refused"] for r in answerable]),
        "stale@5": _mean([r["stale@5"] for r in with_stale]),
        "tokens_mean": _mean([r["tokens"] for r in records]),
        "tokens_p50": metrics.percentile([r["tokens"] for r in records], 0.5) if records else None,
        "p50_ms": round(metrics.percentile(lat, 0.5), 1) if lat else None,
        "p95_ms": round(metrics.percentile(lat, 0.95), 1) if lat else None,
    }


def distributions(records: dict[str, list[dict]]) -> dict:
    """Hybrid top relevance (no floor) of answerable vs unanswerable cases, for the floor plot,
    and what the floor visibly did: the lowest relevance it let through."""
    hyb = records.get("hybrid", [])
    kept = [r["min_relevance"] for r in records.get("hybrid+floor", []) if "min_relevance" in r]
    return {
        "answerable": [r["top_relevance"] for r in hyb if "r@5" in r],
        "unanswerable": [r["top_relevance"] for r in hyb if "r@5" not in r],
        "lowest_kept_with_floor": min(kept) if kept else None,
    }


def current_floor() -> float | None:
    """The floor the in-process recall service applies, read at run time (never a copy of the
    constant: the floor is being recalibrated). None if fusion no longer exposes it."""
    try:
        from factbank.read import fusion

        return float(fusion.DEFAULT.floor)
    except Exception:  # any API change: draw no floor rather than a wrong one
        return None


def evaluate(
    http: httpx.Client,
    stack: Stack,
    *,
    path: Path = SET_DIR,
    per_kind: int | None = None,
    small_bank: bool = False,
    progress: bool = True,
    tick: Callable[[], None] | None = None,
    config: str = DEFAULT_CONFIG,
    offtopic: dict[str, list[str]] | None = None,
) -> dict:
    """Load the set into the stack's bank, run every method, return the report section.

    `per_kind` keeps the first N queries of each kind; `small_bank` also loads only the facts
    those queries name (see `needed_facts`), for fast smoke runs. Numbers from a small bank
    are not comparable with a full run: fewer distractors."""
    facts, cases = load_set(path, config)
    if per_kind is not None:
        cases = subset(cases, per_kind)
    if small_bank:
        facts = needed_facts(facts, cases)
    t = time.perf_counter()
    loaded = ingest(http, stack, facts)
    load_s = time.perf_counter() - t
    with GrepControl(grep_entries(facts)) as grep:
        records = run_methods(
            http, stack, cases, loaded.by_fact, grep, progress=progress, desc=path.name, tick=tick
        )
    refused_offtopic = {}
    for name, texts in (offtopic or {}).items():
        got = [bool(beir.search(http, stack, t, "hybrid", True, limit=LIMIT)[0]) for t in texts]
        refused_offtopic[name] = round(1 - sum(got) / max(len(got), 1), 3)
    return {
        "set": path.name if config == DEFAULT_CONFIG else f"{path.name} ({config})",
        "config": config,
        "kind": "agent-memory",
        "facts": len(facts),
        "queries": len(cases),
        "ingest": {
            "seconds": round(load_s, 2),
            "stored": loaded.stored,
            "reinforced": loaded.reinforced,
            "superseded": loaded.superseded,
            "merged": loaded.merged,
        },
        "summary": {m: summarize(rs) for m, rs in records.items()},
        "distributions": distributions(records),
        # Off-topic queries (public sets' questions, which this bank cannot answer) refused.
        "offtopic_refused": refused_offtopic,
        "floor": current_floor(),
        "records": records,
    }


# --- the four configurations ---------------------------------------------------------------

TABLE_METHODS = ("cosine", "dense", "hybrid", "hybrid+floor", "inject")
TABLE_KINDS = ("exact", "paraphrase", "crosslingual", "chronology")


def offtopic_queries(data: Path | None, n: int) -> dict[str, list[str]]:
    """The first `n` queries of each BEIR set under `data`: questions about encyclopaedia and
    everyday subjects that no agent-memory fact answers (checked by hand, fusion_sweep.py)."""
    from factbank_evals import beir

    if data is None or not Path(data).is_dir():
        return {}
    out = {}
    for folder in sorted(p for p in Path(data).iterdir() if p.is_dir() and beir.is_beir(p)):
        out[folder.name] = list(beir.load(folder).queries.values())[:n]
    return out


def evaluate_configs(
    configs: Sequence[str], *, progress: bool = True, offtopic: dict[str, list[str]] | None = None
) -> list[dict]:
    """Each configuration on its own fresh stack (`evaluate` per config)."""
    from factbank_evals import run_all
    from factbank_evals.stack import running_stack

    run_all.quiet()
    sections = []
    for config in configs:
        with running_stack() as stack, httpx.Client(headers=stack.headers(), timeout=600) as http:
            sections.append(
                evaluate(http, stack, progress=progress, config=config, offtopic=offtopic)
            )
    return sections


def configs_table(sections: Sequence[dict]) -> str:
    """R@5 by kind per method and configuration, then refusals and what injection costs."""
    head = "| config | method | all | " + " | ".join(TABLE_KINDS) + " | refused (near-topic) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for sec in sections:
        for m in TABLE_METHODS:
            s = sec["summary"][m]
            kinds = [s["r@5_by_kind"].get(k) for k in TABLE_KINDS]
            cells = [f"{v:.3f}" if v is not None else "-" for v in (s["r@5"], *kinds)]
            ref = s["refusal_recall"]
            refused = f"{ref:.2f}" if ref is not None else "-"
            lines.append(f"| {sec['config']} | {m} | " + " | ".join(cells) + f" | {refused} |")
    lines += [
        "",
        "| config | prompt block holds a gold fact | precision | tokens/prompt (mean) "
        "| unanswerable prompts given anything | wrong refusals (hybrid+floor) |",
        "|---|---|---|---|---|---|",
    ]
    for sec in sections:
        s, g = sec["summary"]["inject"], sec["summary"]["hybrid+floor"]
        lines.append(
            f"| {sec['config']} | {s['answered_with_gold']} | {s['precision@5']} | "
            f"{s['tokens_mean']} | {s['unanswerable_given_anything']} | {g['wrong_refusals']} |"
        )
    off = [(sec["config"], sec.get("offtopic_refused") or {}) for sec in sections]
    names = sorted({k for _, o in off for k in o})
    if names:
        lines += ["", "| config | off-topic refused: " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        lines += [f"| {c} | " + " | ".join(str(o.get(k, "-")) for k in names) + " |"
                  for c, o in off]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m factbank_evals.agent_memory",
        description="The agent-memory set in each configuration (bare, tags, questions, "
        "tags+questions), every method, on fresh stacks.",
    )
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    ap.add_argument("--out", type=Path, default=None, help="write configs.json and configs.md")
    ap.add_argument("--offtopic-data", type=Path, default=None,
                    help="BEIR folder whose queries are asked as off-topic refusals")
    ap.add_argument("--offtopic-n", type=int, default=200, help="queries per BEIR set")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown config(s) {unknown}; known: {', '.join(CONFIGS)}")
    from factbank_evals.run_all import code_state

    code = code_state()  # at the start: the services import the code once, when they start
    sections = evaluate_configs(
        configs, offtopic=offtopic_queries(args.offtopic_data, args.offtopic_n)
    )
    table = configs_table(sections)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        slim = [{k: v for k, v in s.items() if k != "records"} for s in sections]
        doc = {"code": code, "sections": slim}
        (args.out / "configs.json").write_text(
            json.dumps(doc, indent=1, ensure_ascii=False, default=str)
        )
        (args.out / "configs.md").write_text(table + "\n")
    if args.json:
        print(json.dumps([{k: v for k, v in s.items() if k != "records"} for s in sections],
                         indent=1, ensure_ascii=False, default=str))
    else:
        print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
