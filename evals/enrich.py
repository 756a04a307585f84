"""What enriching bare facts buys: R@5 on the agent-memory set, bare and then enriched through
the enrich path, in one bank of one stack (a same-sitting A/B).

1. The set is imported bare (no tags, no questions: what import, migrate-native and history
   backfill leave), and every query is run: hybrid with the floor (what an agent's search
   gets, R@5 and per kind) and the prompt block (`POST /v1/inject`: does it hold a gold fact).
2. The enrich loop as an agent drives it: `GET /v1/enrich?lacking=questions` hands out
   batches, and each fact gets the set's own questions for it (questions.jsonl, written from
   the facts alone, in English and Chinese: they stand in for what the dispatched agent
   writes) through `PATCH /v1/facts/{id}`, the path the MCP tool `enrich` takes. Then again
   with `lacking=tags` and the set's tags. The queries are run after each step.

Superseded facts are not handed out (only active and disputed facts are), so they stay bare,
as they would in use.

    python -m factbank_evals.enrich [--per-kind N] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import httpx

from factbank_evals import agent_memory, beir
from factbank_evals.beir import read_jsonl

STEPS = ("bare", "+questions", "+tags")
KINDS = agent_memory.TABLE_KINDS


def run_queries(http: httpx.Client, stack, cases, by_fact) -> dict:
    """R@5 of hybrid+floor and the prompt block's hold on a gold fact, per kind."""
    search, inject = [], []
    for case in cases:
        hits, ms = beir.search(http, stack, case.text, "hybrid", True,
                               limit=agent_memory.LIMIT)
        labels = agent_memory._labels([h["fact"]["id"] for h in hits], by_fact)
        search.append(agent_memory._record(case, labels, ms, 0))
        block, ims = agent_memory._inject(http, stack, case.text)
        ilabels = agent_memory._labels(block["facts"], by_fact)
        inject.append(agent_memory._record(case, ilabels, ims, block["tokens"]))
    return {"hybrid+floor": agent_memory.summarize(search),
            "inject": agent_memory.summarize(inject)}


def enrich(http: httpx.Client, stack, lacking: str, by_fact: dict[int, list[str]],
           values: dict[str, list[str]], field: str) -> int:
    """Work through `GET /v1/enrich` batches, PATCHing each fact's `field` with the set's
    values for it; returns how many facts were written."""
    written, after = 0, 0
    while True:
        r = http.get(stack.recall + "/v1/enrich",
                     params={"lacking": lacking, "after": after, "limit": 50})
        r.raise_for_status()
        page = r.json()
        for fact in page["facts"]:
            wanted = [v for sid in by_fact.get(fact["id"], []) for v in values.get(sid, [])]
            wanted = list(dict.fromkeys(wanted))
            if wanted:
                p = http.patch(stack.ingest + f"/v1/facts/{fact['id']}", json={field: wanted})
                p.raise_for_status()
                written += 1
        if page.get("next_cursor") is None:
            return written
        after = page["next_cursor"]


def evaluate(http: httpx.Client, stack, per_kind: int | None = None,
             small_bank: bool = False) -> dict:
    """`small_bank`: only the facts the chosen queries name (agent_memory.needed_facts), for
    smoke runs; its numbers are not comparable with a full run."""
    facts, cases = agent_memory.load_set(config="bare")
    if per_kind:
        cases = agent_memory.subset(cases, per_kind)
    if small_bank:
        facts = agent_memory.needed_facts(facts, cases)
    loaded = agent_memory.ingest(http, stack, facts)
    path = agent_memory.SET_DIR
    questions = {r["id"]: r["questions"] for r in read_jsonl(path / "questions.jsonl")}
    tags = {f["id"]: f.get("tags") or [] for f in read_jsonl(path / "facts.jsonl")}
    out = {"facts": len(facts), "queries": len(cases), "steps": {}}
    out["steps"]["bare"] = run_queries(http, stack, cases, loaded.by_fact)
    out["written_questions"] = enrich(http, stack, "questions", loaded.by_fact, questions,
                                      "questions")
    out["steps"]["+questions"] = run_queries(http, stack, cases, loaded.by_fact)
    out["written_tags"] = enrich(http, stack, "tags", loaded.by_fact, tags, "tags")
    out["steps"]["+tags"] = run_queries(http, stack, cases, loaded.by_fact)
    left = http.get(stack.recall + "/v1/enrich", params={"limit": 1}).json()["remaining"]
    out["left_bare"] = left
    return out


def table(result: dict) -> str:
    head = "| facts | R@5 (hybrid+floor) | " + " | ".join(KINDS) + " | block holds a gold fact |"
    lines = [f"agent-memory: {result['facts']} facts, {result['queries']} queries; enriched "
             f"through GET /v1/enrich + PATCH: {result['written_questions']} facts given "
             f"questions, {result['written_tags']} given tags; {result['left_bare']} left "
             "(superseded facts are not handed out)", "", head,
             "|" + "---|" * (head.count("|") - 1)]
    for step in STEPS:
        s = result["steps"][step]
        g = s["hybrid+floor"]
        kinds = [g["r@5_by_kind"].get(k) for k in KINDS]
        cells = [f"{v:.3f}" if v is not None else "-" for v in (g["r@5"], *kinds)]
        lines.append(f"| {step} | " + " | ".join(cells)
                     + f" | {s['inject']['answered_with_gold']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m factbank_evals.enrich",
        description="R@5 of bare facts, then of the same facts enriched through the enrich "
        "path (the set's own questions and tags standing in for the agent's).")
    ap.add_argument("--per-kind", type=int, default=None,
                    help="only the first N queries of each kind")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from factbank_evals import run_all
    from factbank_evals.stack import running_stack

    run_all.quiet()
    with running_stack() as stack, httpx.Client(headers=stack.headers(), timeout=600) as http:
        result = evaluate(http, stack, args.per_kind)
    print(json.dumps(result, indent=1) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
