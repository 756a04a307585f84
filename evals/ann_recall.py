"""The dense leg's recall against exact search (item 4): pgvector HNSW with the
product's filters (`search._DENSE_SQL`: bank, language group, iterative scans) against an exact
scan of the same SQL, at each bank size, five vectors a fact, for several `hnsw.ef_search`.

The bank is filled as `factbank bench` fills it (`bench._fill`: synthetic mixed zh/en facts,
each with its own vector and four writer-question vectors, real embeddings of templates plus
noise, so HNSW sees clusters). Queries are fresh points of the same kind (a template's
embedding plus noise). Recall@k: the share of the exact top k of each language group that
the index returned; `top10` is the share of the exact top 10 over both groups (what ranking
sees first).

    python -m factbank_evals.ann_recall [--sizes 1000,10000] [--queries 50] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np

EF_SEARCH = (40, 100, 200, 400)


async def _measure(dsn: str, bank: str, queries: np.ndarray, k: int) -> dict:
    from pgvector.asyncpg import register_vector

    from factbank.read.search import _DENSE_SQL
    from factbank.store import db

    conn = await db.connect(dsn)
    await register_vector(conn)
    try:
        bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = $1", bank)

        async def run(settings: list[str], q: np.ndarray) -> tuple[list[tuple], float]:
            async with conn.transaction(readonly=True):
                for s in settings:
                    await conn.execute(s)
                t = time.perf_counter()
                rows = await conn.fetch(_DENSE_SQL, bank_id, q, k, q)
                return rows, (time.perf_counter() - t) * 1000

        exact = []
        exact_ms = []
        for q in queries:
            rows, ms = await run(["SET LOCAL enable_indexscan = off"], q)
            exact.append(rows)
            exact_ms.append(ms)
        out = {"exact_p50_ms": round(float(np.median(exact_ms)), 2)}
        for ef in EF_SEARCH:
            recall, top10, lat = [], [], []
            for q, ex in zip(queries, exact, strict=True):
                rows, ms = await run([f"SET LOCAL hnsw.ef_search = {ef}",
                                      "SET LOCAL hnsw.iterative_scan = relaxed_order"], q)
                lat.append(ms)
                got = {(r["fact_id"], r["ord"]) for r in rows}
                want = {(r["fact_id"], r["ord"]) for r in ex}
                recall.append(len(got & want) / max(len(want), 1))
                best = sorted(ex, key=lambda r: -r["cosine"])[:10]
                top10.append(sum((r["fact_id"], r["ord"]) in got for r in best) / len(best))
            out[f"ef{ef}"] = {"recall@k": round(float(np.mean(recall)), 4),
                              "top10": round(float(np.mean(top10)), 4),
                              "p50_ms": round(float(np.median(lat)), 2)}
        return out
    finally:
        await conn.close()


def run(sizes: list[int], n_queries: int, k: int = 50) -> dict:
    from factbank_evals import bench
    from factbank_evals.run_all import code_state, quiet
    from factbank_evals.stack import running_stack

    quiet()
    centres = bench.template_vectors()
    rng = np.random.default_rng(7)
    noise = rng.normal(size=(n_queries, centres.shape[1])).astype(np.float32)
    noise *= bench.NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
    queries = centres[rng.integers(0, len(centres), n_queries)] + noise
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    result: dict = {"k_per_group": k, "queries": n_queries, "vectors_per_fact":
                    bench.VECTORS_PER_FACT, "code": code_state(), "sizes": {}}
    with running_stack() as stack:
        have = 0
        for size in sorted(sizes):
            t = time.perf_counter()
            asyncio.run(bench._fill(stack, have, size, centres, True, lambda n: None))
            have = size
            row = asyncio.run(_measure(stack.dsn, stack.bank, queries, k))
            row["fill_s"] = round(time.perf_counter() - t, 1)
            result["sizes"][size] = row
    return result


def table(result: dict) -> str:
    lines = ["| facts (x5 vectors) | exact p50 ms | " + " | ".join(
        f"ef_search {ef}: recall@{result['k_per_group']} / top-10 / p50 ms" for ef in EF_SEARCH)
        + " |", "|---|---|" + "---|" * len(EF_SEARCH)]
    for size, row in result["sizes"].items():
        cells = [f"{row[f'ef{ef}']['recall@k']:.3f} / {row[f'ef{ef}']['top10']:.3f} / "
                 f"{row[f'ef{ef}']['p50_ms']:.1f}" for ef in EF_SEARCH]
        lines.append(f"| {int(size):,} | {row['exact_p50_ms']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m factbank_evals.ann_recall",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    result = run([int(s) for s in args.sizes.split(",")], args.queries)
    print(table(result))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ann_recall.json").write_text(json.dumps(result, indent=1) + "\n")
        (args.out / "ann_recall.md").write_text(table(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
