"""Ingest throughput and latency on this machine, through the real HTTP service.

    python -m factbank_evals.bench_ingest [--n 200] [--batch 500] [--json]

Single adds are unique facts (each one is embedded: a cold embedding cache), timed one request
at a time; batch throughput is one JSONL import of `--batch` facts in one transaction.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import httpx
from tqdm import tqdm

from factbank_evals.metrics import percentile
from factbank_evals.stack import running_stack

EN = [
    "service {s} listens on port {p}",
    "the {s} database lives on host {h}",
    "{s} deploys go through runner-{n}",
    "use pnpm for {s}, never npm",
    "error E{n} in {s} means the cache on {h}:{p} is down",
]
ZH = [
    "{s} 服务监听 {p} 端口",
    "{s} 的数据库在主机 {h} 上",
    "{s} 的部署走 runner-{n}",
    "{s} 项目用 pnpm 安装依赖, 不用 npm",
    "{s} 报错 E{n} 是因为 {h}:{p} 上的缓存挂了",
]


def synthetic_fact(i: int, rng: random.Random) -> dict:
    template = rng.choice(EN if i % 2 else ZH)
    text = template.format(
        s=f"svc{i}", p=rng.randint(1024, 65000), h=f"host-{i}", n=rng.randint(1000, 9999)
    )
    return {
        "content": text,
        "category": "environment",
        "tags": ["bench", "基准"],
        # Four writer questions (2 en + 2 zh), as every writer is asked for: each is embedded
        # in the same call as the fact (target: p50 <= 80 ms with four questions).
        "questions": [
            f"Which port does svc{i} use?",
            f"Where does svc{i} run?",
            f"svc{i} 用哪个端口？",
            f"svc{i} 部署在哪台机器上？",
        ],
        "source": {"kind": "command", "location": "bench"},
        "quote": text,
        "origin": "verified",
    }


def run(n: int, batch: int) -> dict:
    rng = random.Random(7)
    with running_stack() as stack, httpx.Client(headers=stack.headers(), timeout=120) as http:
        http.post(stack.ingest + "/v1/facts", json=synthetic_fact(-1, rng))  # warm up
        latencies = []
        for i in tqdm(range(n), desc="single adds", unit="fact"):
            t = time.perf_counter()
            r = http.post(stack.ingest + "/v1/facts", json=synthetic_fact(i, rng))
            latencies.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
        body = "\n".join(json.dumps(synthetic_fact(100_000 + i, rng)) for i in range(batch))
        t = time.perf_counter()
        r = http.post(stack.ingest + "/v1/facts/import", content=body)
        r.raise_for_status()
        batch_s = time.perf_counter() - t
    return {
        "single_adds": n,
        "add_p50_ms": round(statistics.median(latencies), 1),
        "add_p95_ms": round(percentile(latencies, 0.95), 1),
        "single_facts_per_s": round(n / (sum(latencies) / 1000), 1),
        "batch_size": batch,
        "batch_seconds": round(batch_s, 2),
        "batch_facts_per_s": round(batch / batch_s, 1),
    }


def table(result: dict) -> str:
    rows = [
        ("single add p50", f"{result['add_p50_ms']} ms"),
        ("single add p95", f"{result['add_p95_ms']} ms"),
        ("single-add throughput", f"{result['single_facts_per_s']} facts/s"),
        (
            f"batch import ({result['batch_size']} facts, 1 txn)",
            f"{result['batch_facts_per_s']} facts/s",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(
        ["| metric | value |", "|---|---|", *(f"| {k.ljust(width)} | {v} |" for k, v in rows)]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.n, args.batch)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
