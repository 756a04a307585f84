"""What the near-duplicate lookup of one add costs, and whether it answers what an exact scan
answers: `store.nearest.nearest_own` (the write gate, `check`, `duplicates_of`, the misses'
repeats) against the single join it replaced (`BEFORE`, planned facts first) and against the
exact scan (every matching fact's own vector, no index).

    python -m factbank_evals.bench_near [--sizes 10000,100000] [--adds 30] [--out DIR]

The bank is filled as `factbank bench` fills it (`bench._fill`: synthetic facts, category
`environment`, no project, five vectors each); then every 25th fact is moved to project `p25`
(4% of the bank) and every 1000th (another one) to category `decision` (0.1%), so three
places are asked: the bank's main one (every fact matches), a project of 4% (the graph must
skip 24 vectors in 25), and a rare category (the nearest vectors all belong to other places).
The new facts are fresh points like the bank's (`ann_recall.make_queries`). Per add and place:
the backend's CPU time (/proc/<pid>/stat), the buffers its statements touch (EXPLAIN
(ANALYZE, BUFFERS) of each, the first add), and the share of adds whose five facts are the
exact scan's five (and whose facts at cosine >= NEAR are, which is what the gate acts on).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

# The near-duplicate query before store.nearest: one join, left to the planner.
BEFORE = """SELECT f.id, f.content, f.status, 1 - (v.embedding <=> $4) AS similarity
            FROM fact_vectors v JOIN facts f ON f.id = v.fact_id
            WHERE v.bank_id = $1 AND v.ord = 0 AND f.category = $2
              AND f.project IS NOT DISTINCT FROM $3 AND f.status IN ('active', 'disputed')
            ORDER BY v.embedding <=> $4 LIMIT 5"""
PLACES = {"main (all facts)": ("environment", None), "project, 4%": ("environment", "p25"),
          "rare category, 0.1%": ("decision", None)}
STATUSES = ("active", "disputed")


class Explaining:
    """A connection that also runs EXPLAIN (ANALYZE, BUFFERS) of every statement it fetches
    with, summing the buffers: the real code path, each statement's cost counted."""

    def __init__(self, conn) -> None:
        self.conn, self.buffers, self.statements = conn, 0, 0

    def transaction(self):
        return self.conn.transaction()

    async def execute(self, sql: str, *args):
        return await self.conn.execute(sql, *args)

    async def _explain(self, sql: str, args) -> None:
        from factbank_evals.ann_recall import buffers

        plan = await self.conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, *args)
        self.buffers += buffers(json.loads(plan)[0]["Plan"])
        self.statements += 1

    async def fetch(self, sql: str, *args):
        await self._explain(sql, args)
        return await self.conn.fetch(sql, *args)

    async def fetchval(self, sql: str, *args):
        await self._explain(sql, args)
        return await self.conn.fetchval(sql, *args)


async def before(conn, bank_id: int, place: tuple, q) -> list:
    """The old lookup as the gate ran it."""
    async with conn.transaction():
        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        return list(await conn.fetch(BEFORE, bank_id, *place, q))


async def after(conn, bank_id: int, place: tuple, q) -> list:
    from factbank.store import nearest

    return await nearest.nearest_own(conn, bank_id, q, place=place, statuses=STATUSES)


async def exact(conn, bank_id: int, place: tuple, q) -> list:
    from factbank.store import nearest

    sql = nearest.queries(True, True, False, 5)["exact"]
    return list(await conn.fetch(sql, bank_id, q, *place, list(STATUSES)))


async def _measure(dsn: str, bank: str, queries: np.ndarray) -> dict:
    from pgvector.asyncpg import register_vector

    from factbank.store import db
    from factbank.text.claims import NEAR
    from factbank_evals.ann_recall import cpu_s

    conn = await db.connect(dsn)
    await register_vector(conn)
    try:
        bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = $1", bank)
        await conn.execute("UPDATE facts SET project = 'p25' WHERE bank_id = $1 AND id % 25 = 0",
                           bank_id)
        await conn.execute("INSERT INTO categories (bank_id, name) VALUES ($1, 'decision') "
                           "ON CONFLICT DO NOTHING", bank_id)
        await conn.execute("UPDATE facts SET category = 'decision' "
                           "WHERE bank_id = $1 AND id % 1000 = 1", bank_id)
        await conn.execute("ANALYZE facts")
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        out: dict = {}
        for name, place in PLACES.items():
            row: dict = {}
            answers: dict[str, list] = {}
            for label, fn in (("exact", exact), ("before", before), ("after", after)):
                shown = Explaining(conn)
                await fn(shown, bank_id, place, queries[0])
                cpu = cpu_s(pid)
                answers[label] = [await fn(conn, bank_id, place, q) for q in queries]
                row[label] = {"cpu_ms": round((cpu_s(pid) - cpu) * 1000 / len(queries), 2),
                              "buffers": shown.buffers, "statements": shown.statements}
            for label in ("before", "after"):
                same = [[r["id"] for r in a] == [r["id"] for r in e]
                        for a, e in zip(answers[label], answers["exact"], strict=True)]
                near = [{r["id"] for r in a if r["similarity"] >= NEAR}
                        == {r["id"] for r in e if r["similarity"] >= NEAR}
                        for a, e in zip(answers[label], answers["exact"], strict=True)]
                row[label]["same_top5"] = round(float(np.mean(same)), 3)
                row[label]["same_near"] = round(float(np.mean(near)), 3)
            out[name] = row
        return out
    finally:
        await conn.close()


def run(sizes: list[int], adds: int) -> dict:
    from factbank_evals.ann_recall import each_size
    from factbank_evals.run_all import code_state

    return {"adds": adds, "code": code_state(), "sizes": each_size(sizes, adds, _measure)}


def table(result: dict) -> str:
    lines = ["| facts | place | before: CPU ms / buffers / same top 5 | after: CPU ms / buffers"
             " (statements) / same top 5 / same >= NEAR | exact scan: CPU ms / buffers |",
             "|---|---|---|---|---|"]
    for size, row in result["sizes"].items():
        for place in PLACES:
            b, a, e = row[place]["before"], row[place]["after"], row[place]["exact"]
            lines.append(
                f"| {int(size):,} | {place} | {b['cpu_ms']:.1f} / {b['buffers']:,} / "
                f"{b['same_top5']:.2f} | {a['cpu_ms']:.1f} / {a['buffers']:,} "
                f"({a['statements']}) / {a['same_top5']:.2f} / {a['same_near']:.2f} | "
                f"{e['cpu_ms']:.1f} / {e['buffers']:,} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m factbank_evals.bench_near",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--adds", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    result = run([int(s) for s in args.sizes.split(",")], args.adds)
    print(table(result))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_near.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
