"""The dense leg's recall against exact search: pgvector HNSW with the product's filters
(`search._DENSE_SQL`: bank, language group, its partial half-precision graphs, iterative scans,
the exact re-rank of a pool of candidates) against an exact scan (every vector of the bank's
group, float32 cosine, no index), at each bank size, five vectors a fact, for several
(`hnsw.ef_search`, pool) settings.

The bank is filled as `factbank bench` fills it (`bench._fill`: synthetic mixed zh/en facts,
each with its own vector and four writer-question vectors, real embeddings of templates plus
noise, so HNSW sees clusters). Queries are fresh points of the same kind (a template's
embedding plus noise). Recall@k: the share of the exact top k of each language group that
the index returned; `top10` is the share of the exact top 10 over both groups (what ranking
sees first). Besides wall time (load-dependent), each setting's cost is counted where the load
does not reach it: the buffers one query touches (EXPLAIN (ANALYZE, BUFFERS) of the first
query) and the backend's CPU time per query (/proc/<pid>/stat, user + system).

    python -m factbank_evals.ann_recall [--sizes 1000,10000] [--queries 50] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import numpy as np

# (hnsw.ef_search, vectors each group's graph proposes for the exact re-rank)
SETTINGS = ((40, 50), (100, 100), (200, 100), (400, 100), (400, 200), (800, 200))

# The reference: the k nearest of each group by the stored float32 vectors, read whole.
EXACT_SQL = """
(SELECT fact_id, ord, 1 - (embedding <=> $2) AS cosine FROM fact_vectors
  WHERE bank_id = $1 AND lang = 'zh' ORDER BY embedding <=> $2 LIMIT $3)
UNION ALL
(SELECT fact_id, ord, 1 - (embedding <=> $2) AS cosine FROM fact_vectors
  WHERE bank_id = $1 AND lang <> 'zh' ORDER BY embedding <=> $2 LIMIT $3)
"""


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (a Postgres backend on this machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def buffers(plan: dict) -> int:
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


async def _measure(dsn: str, bank: str, queries: np.ndarray, k: int) -> dict:
    from pgvector.asyncpg import register_vector

    from factbank.read.search import _DENSE_SQL, dense_settings
    from factbank.store import db

    conn = await db.connect(dsn)
    await register_vector(conn)
    try:
        bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = $1", bank)
        pid = await conn.fetchval("SELECT pg_backend_pid()")

        async def timed(sql: str, settings: list[str], args: list) -> dict:
            rows, lat = [], []
            cpu = cpu_s(pid)
            for q in queries:
                async with conn.transaction(readonly=True):
                    for s in settings:
                        await conn.execute(s)
                    t = time.perf_counter()
                    rows.append(await conn.fetch(sql, bank_id, q, k, *[
                        q if a == "q" else a for a in args]))
                    lat.append((time.perf_counter() - t) * 1000)
            cpu_ms = (cpu_s(pid) - cpu) * 1000 / len(queries)
            async with conn.transaction(readonly=True):
                for s in settings:
                    await conn.execute(s)
                plan = await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql,
                                           bank_id, queries[0], k,
                                           *[queries[0] if a == "q" else a for a in args])
            return {"rows": rows, "p50_ms": round(float(np.median(lat)), 2),
                    "cpu_ms": round(cpu_ms, 2),
                    "buffers": buffers(json.loads(plan)[0]["Plan"])}

        exact = await timed(EXACT_SQL, ["SET LOCAL enable_indexscan = off"], [])
        out = {"exact_p50_ms": exact["p50_ms"], "exact_cpu_ms": exact["cpu_ms"],
               "exact_buffers": exact["buffers"]}
        for ef, pool in SETTINGS:
            got_all = await timed(_DENSE_SQL, [dense_settings(ef)], ["q", pool, "q"])
            recall, top10 = [], []
            for rows, ex in zip(got_all["rows"], exact["rows"], strict=True):
                got = {(r["fact_id"], r["ord"]) for r in rows}
                want = {(r["fact_id"], r["ord"]) for r in ex}
                recall.append(len(got & want) / max(len(want), 1))
                best = sorted(ex, key=lambda r: -r["cosine"])[:10]
                top10.append(sum((r["fact_id"], r["ord"]) in got for r in best) / len(best))
            out[f"ef{ef}_pool{pool}"] = {
                "recall@k": round(float(np.mean(recall)), 4),
                "top10": round(float(np.mean(top10)), 4),
                **{key: got_all[key] for key in ("p50_ms", "cpu_ms", "buffers")}}
        return out
    finally:
        await conn.close()


def make_queries(centres: np.ndarray, n: int) -> np.ndarray:
    """Fresh points like the bank's: a template's vector plus the bench's noise, unit length."""
    from factbank_evals import bench

    rng = np.random.default_rng(7)
    noise = rng.normal(size=(n, centres.shape[1])).astype(np.float32)
    noise *= bench.NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
    queries = centres[rng.integers(0, len(centres), n)] + noise
    return queries / np.linalg.norm(queries, axis=1, keepdims=True)


def each_size(sizes: list[int], n_queries: int, measure) -> dict[int, dict]:
    """One throwaway bank filled as the bench fills it (`bench._fill`), to each size in turn,
    measured there by `await measure(dsn, bank, queries)` (queries: `make_queries`): the rows
    by size, each with the time its fill took."""
    from factbank_evals import bench
    from factbank_evals.run_all import quiet
    from factbank_evals.stack import running_stack

    quiet()
    centres = bench.template_vectors()
    queries = make_queries(centres, n_queries)
    rows: dict[int, dict] = {}
    with running_stack() as stack:
        have = 0
        for size in sorted(sizes):
            t = time.perf_counter()
            asyncio.run(bench._fill(stack, have, size, centres, True, lambda n: None))
            have = size
            row = asyncio.run(measure(stack.dsn, stack.bank, queries))
            rows[size] = {**row, "fill_s": round(time.perf_counter() - t, 1)}
    return rows


def run(sizes: list[int], n_queries: int, k: int = 50) -> dict:
    from factbank_evals import bench
    from factbank_evals.run_all import code_state

    result: dict = {"k_per_group": k, "queries": n_queries, "vectors_per_fact":
                    bench.VECTORS_PER_FACT, "code": code_state()}
    result["sizes"] = each_size(sizes, n_queries,
                                lambda dsn, bank, queries: _measure(dsn, bank, queries, k))
    return result


def table(result: dict) -> str:
    head = "| facts (x5 vectors) | exact: p50 ms / CPU ms / buffers | " + " | ".join(
        f"ef_search {ef}, pool {pool}: recall@{result['k_per_group']} / top-10 / p50 ms / "
        "CPU ms / buffers" for ef, pool in SETTINGS) + " |"
    lines = [head, "|---|---|" + "---|" * len(SETTINGS)]
    for size, row in result["sizes"].items():
        cells = []
        for ef, pool in SETTINGS:
            c = row[f"ef{ef}_pool{pool}"]
            cells.append(f"{c['recall@k']:.3f} / {c['top10']:.3f} / {c['p50_ms']:.1f} / "
                         f"{c['cpu_ms']:.1f} / {c['buffers']:,}")
        lines.append(f"| {int(size):,} | {row['exact_p50_ms']:.1f} / {row['exact_cpu_ms']:.1f}"
                     f" / {row['exact_buffers']:,} | " + " | ".join(cells) + " |")
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
