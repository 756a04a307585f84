"""`factbank eval all`: our agent-memory set plus every BEIR set under a folder, one report.

Each set gets its own services, bank and empty cache (`fresh_stack`) over one database, so
sets never see each other's documents and every query's first call is really cold. Every set
runs every method
(`agent_memory.run_methods`): grep control, BM25 only, dense only, hybrid, hybrid + floor.

Unanswerable queries: the agent-memory set has its own refusal queries. A BEIR set has none, so
its bank is also asked a sample of another set's queries (from a different source family:
the XQuAD-R sets are translations of one another, their questions are answerable in each
other's corpora); the right answer to those is nothing. That gives every set a refusal
precision/recall and a score distribution of unanswerable queries to draw the floor against.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
from tqdm import tqdm

from factbank_evals import agent_memory as am
from factbank_evals import beir
from factbank_evals.grep_control import GrepControl
from factbank_evals.stack import Stack, running_stack

UNANSWERABLE_PER_SET = 200


@contextmanager
def database() -> Iterator[str | None]:
    """DATABASE_URL if set (None: running_stack reads it), else one embedded cluster for the
    whole run, so every set's services share it and its passage-embedding cache."""
    from factbank.settings import Settings

    if Settings.from_env().database_url:
        yield None
        return
    from factbank.runtime.embedded import EmbeddedPostgres

    home = Path(tempfile.mkdtemp(prefix="factbank-evalall-"))
    os.chmod(home, 0o755)
    pg = EmbeddedPostgres(home)
    try:
        yield pg.start()
    finally:
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def fresh_stack(dsn: str | None) -> Iterator[Stack]:
    """Services started for one set, with their own bank and an empty in-process cache.

    Why per set: the service caches query embeddings by text, across banks. The XQuAD-R
    sets share their questions, and one set's queries are another's unanswerables, so on
    one long-lived stack a later set's "cold" first call would find its embedding cached.
    Redis is turned off for the same reason (it would outlive the restart)."""
    overrides: dict[str, object] = {"max_fact_chars": 4000, "redis_url": None}
    if dsn:
        overrides["database_url"] = dsn
    with running_stack(**overrides) as stack:
        yield stack


def http_for(s: Stack) -> httpx.Client:
    # A corpus import embeds every document in one request: on a busy 2-core machine that
    # took more than 10 minutes for 256 paragraphs.
    return httpx.Client(headers=s.headers(), timeout=httpx.Timeout(7200, connect=30))


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
    with http_for(stack) as http:
        t = time.perf_counter()
        by_doc = beir.load_corpus(http, stack, data, progress=progress)
        load_s = time.perf_counter() - t
        by_fact = {fid: [doc] for fid, doc in by_doc.items()}
        entries = [(d, text) for d, text in data.corpus.items()]
        with GrepControl(entries) as grep:
            records = am.run_methods(
                http, stack, cases, by_fact, grep, inject=False, progress=False, tick=tick
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
    """Everything, one fresh stack per set; returns the report dict (`report.write` renders it).

    With `partial`, the sections done so far are written there as JSON after every set, so
    an hour-long run that dies near the end still leaves its numbers."""
    quiet()
    options = {"max_queries": max_queries, "per_kind": per_kind, "unanswerable": n_foreign}
    code = code_state()  # at the start: the services import the code once, when they start

    def checkpoint() -> None:
        if partial is not None:
            partial.parent.mkdir(parents=True, exist_ok=True)
            doc = envelope(sections, data_dir, options, time.perf_counter() - started, code)
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
    with database() as dsn:
        with fresh_stack(dsn) as stack, http_for(stack) as http:
            bar.set_postfix_str("agent-memory")
            sections.append(
                am.evaluate(
                    http,
                    stack,
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
            with fresh_stack(dsn) as stack:
                sections.append(
                    run_beir_set(
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
    return envelope(sections, data_dir, options, time.perf_counter() - started, code)


def quiet() -> None:
    """One log line per request (httpx's, and the in-process services' access log) would bury
    the progress bar; warnings and errors still show."""
    for name in ("httpx", "factbank.access"):
        logging.getLogger(name).setLevel(logging.WARNING)


def envelope(
    sections: list[dict],
    data_dir: Path | None,
    options: dict,
    seconds: float,
    code: dict | None = None,
) -> dict:
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
        "code": code if code is not None else code_state(),
        "floor": am.current_floor(),
        "options": options,
        "data_dir": str(data_dir) if data_dir else None,
        "sets": sections,
    }


def code_state() -> dict | None:
    """The commit measured and any uncommitted changes to the code under test: in a shared
    working tree the numbers belong to what was on disk, not just to HEAD."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        ).stdout

    try:
        head = git("rev-parse", "--short", "HEAD").strip()
        dirty = git("status", "--porcelain", "--", "services", "migrations", "evals")
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": head, "uncommitted": [line[3:] for line in dirty.splitlines()]}


def _embedder_name() -> str | None:
    from factbank.settings import Settings

    return getattr(Settings.from_env(), "embedder", None)
