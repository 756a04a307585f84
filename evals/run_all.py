"""`factbank eval all`: our agent-memory set plus every BEIR set under a folder, one report.

One throwaway stack serves every set; each set gets its own bank (created for the run, dropped
after it), so sets never see each other's documents. Every set runs every method
(`agent_memory.run_methods`): grep control, BM25 only, dense only, hybrid, hybrid + floor.

Unanswerable queries: the agent-memory set has its own refusal queries. A BEIR set has none, so
its bank is also asked a sample of another set's queries (from a different source family:
the XQuAD-R sets are translations of one another, their questions are answerable in each
other's corpora); the right answer to those is nothing. That gives every set a refusal
precision/recall and a score distribution of unanswerable queries to draw the floor against.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import random
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
from tqdm import tqdm

from factbank_evals import agent_memory as am
from factbank_evals import beir
from factbank_evals.grep_control import GrepControl
from factbank_evals.stack import Stack, running_stack

UNANSWERABLE_PER_SET = 200


async def _create_bank(dsn: str, name: str) -> str:
    from factbank import banks, db

    conn = await db.connect(dsn)
    try:
        await banks.create_bank(conn, name, "personal")
        _, token = await banks.issue_token(conn, name, "eval", "read,write,admin", "eval")
        return token
    finally:
        await conn.close()


async def _drop_bank(dsn: str, name: str) -> None:
    from factbank import db

    conn = await db.connect(dsn)
    try:
        await conn.execute("DELETE FROM banks WHERE name = $1", name)
    finally:
        await conn.close()


@contextmanager
def own_bank(stack: Stack, label: str) -> Iterator[Stack]:
    """A fresh bank (and token) on the same services for one set; dropped afterwards."""
    slug = re.sub(r"[^a-z0-9_.-]+", "-", label.lower()).strip("-")[:30] or "set"
    name = f"eval-{slug}-{secrets.token_hex(3)}"
    token = asyncio.run(_create_bank(stack.dsn, name))
    try:
        yield replace(stack, token=token, bank=name)
    finally:
        asyncio.run(_drop_bank(stack.dsn, name))


def family(name: str) -> str:
    """Source family of a BEIR set (xquad-r-zh2en -> xquad): sets of one family are
    translations of each other, so one's queries are not unanswerable in the other."""
    return name.split("-")[0]


def partner(name: str, names: list[str]) -> str | None:
    """The set whose queries serve as unanswerable ones for `name`: the next set in sorted
    order from another family."""
    ordered = sorted(names)
    start = ordered.index(name)
    for step in range(1, len(ordered)):
        other = ordered[(start + step) % len(ordered)]
        if family(other) != family(name):
            return other
    return None


def beir_cases(
    data: beir.BeirSet, foreign: beir.BeirSet | None, max_queries: int | None, n_foreign: int
) -> list[am.Case]:
    cases = [
        am.Case(qid, text, "beir", answers=set(data.qrels[qid]))
        for qid, text in list(data.queries.items())[:max_queries]
    ]
    if foreign is not None:
        rng = random.Random(0)
        pool = list(foreign.queries.items())
        picked = rng.sample(pool, min(n_foreign, len(pool)))
        cases += [am.Case(f"{foreign.name}:{qid}", text, "refusal") for qid, text in picked]
    return cases


def run_beir_set(
    http_for,
    stack: Stack,
    data: beir.BeirSet,
    foreign: beir.BeirSet | None,
    *,
    max_queries: int | None,
    n_foreign: int,
    tick,
    progress: bool = True,
) -> dict:
    cases = beir_cases(data, foreign, max_queries, n_foreign)
    with own_bank(stack, data.name) as bank, http_for(bank) as http:
        t = time.perf_counter()
        by_doc = beir.load_corpus(http, bank, data, progress=progress)
        load_s = time.perf_counter() - t
        by_fact = {fid: [doc] for fid, doc in by_doc.items()}
        entries = [(d, text) for d, text in data.corpus.items()]
        with GrepControl(entries) as grep:
            records = am.run_methods(
                http, bank, cases, by_fact, grep, inject=False, progress=False, tick=tick
            )
    return {
        "set": data.name,
        "kind": "beir",
        "facts": len(data.corpus),
        "queries": len(cases),
        "unanswerable_from": foreign.name if foreign else None,
        "ingest": {"seconds": round(load_s, 2), "stored": len(by_doc)},
        "summary": {m: am.summarize(rs) for m, rs in records.items()},
        "distributions": am.distributions(records),
    }


def run(
    data_dir: Path | None,
    *,
    max_queries: int | None = None,
    per_kind: int | None = None,
    n_foreign: int = UNANSWERABLE_PER_SET,
    progress: bool = True,
    agent_memory_path: Path = am.SET_DIR,
    partial: Path | None = None,
) -> dict:
    """Everything, in one stack; returns the report dict (`report.write` renders it).

    With `partial`, the sections done so far are written there as JSON after every set, so
    an hour-long run that dies near the end still leaves its numbers."""
    quiet()
    options = {"max_queries": max_queries, "per_kind": per_kind, "unanswerable": n_foreign}

    def checkpoint() -> None:
        if partial is not None:
            partial.parent.mkdir(parents=True, exist_ok=True)
            doc = envelope(sections, data_dir, options, time.perf_counter() - started)
            partial.write_text(json.dumps(doc, ensure_ascii=False, default=str))

    sets: list[beir.BeirSet] = []
    if data_dir is not None:
        folders = sorted(p for p in Path(data_dir).iterdir() if p.is_dir() and beir.is_beir(p))
        sets = [beir.load(p) for p in folders]
    by_name = {s.name: s for s in sets}
    _, am_cases = am.load_set(agent_memory_path)
    total = len(am_cases if per_kind is None else am.subset(am_cases, per_kind))
    for s in sets:
        total += len(list(s.queries)[:max_queries])
        p = partner(s.name, list(by_name))
        total += min(n_foreign, len(by_name[p].queries)) if p else 0
    started = time.perf_counter()
    sections: list[dict] = []
    bar = tqdm(total=total, desc="eval all", unit="q", disable=not progress)
    with running_stack(max_fact_chars=4000) as stack:

        def http_for(s: Stack) -> httpx.Client:
            # A corpus import embeds every document in one request: on a busy 2-core machine
            # that took more than 10 minutes for 256 paragraphs.
            return httpx.Client(headers=s.headers(), timeout=httpx.Timeout(7200, connect=30))

        with own_bank(stack, "agent-memory") as bank, http_for(bank) as http:
            bar.set_postfix_str("agent-memory")
            sections.append(
                am.evaluate(
                    http,
                    bank,
                    path=agent_memory_path,
                    per_kind=per_kind,
                    progress=False,
                    tick=bar.update,
                )
            )
        checkpoint()
        for s in sets:
            bar.set_postfix_str(s.name)
            p = partner(s.name, list(by_name))
            sections.append(
                run_beir_set(
                    http_for,
                    stack,
                    s,
                    by_name[p] if p else None,
                    max_queries=max_queries,
                    n_foreign=n_foreign,
                    tick=bar.update,
                    progress=progress,
                )
            )
            checkpoint()
    bar.close()
    return envelope(sections, data_dir, options, time.perf_counter() - started)


def quiet() -> None:
    """One log line per request (httpx's, and the in-process services' access log) would bury
    the progress bar; warnings and errors still show."""
    for name in ("httpx", "factbank.access"):
        logging.getLogger(name).setLevel(logging.WARNING)


def envelope(sections: list[dict], data_dir: Path | None, options: dict, seconds: float) -> dict:
    """The report dict around the per-set sections: when, where, with what."""
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg": [round(x, 2) for x in os.getloadavg()],
        },
        "embedder": _embedder_name(),
        "floor": am.current_floor(),
        "options": options,
        "data_dir": str(data_dir) if data_dir else None,
        "sets": sections,
    }


def _embedder_name() -> str | None:
    from factbank.settings import Settings

    return getattr(Settings.from_env(), "embedder", None)
