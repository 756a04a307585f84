"""The facts of a bank nearest a vector by their own vector (fact_vectors ord 0, its own partial
HNSW graph `fact_vectors_own`, migration 0015), among the facts that pass a filter: the
near-duplicate checks of the write gate, `check`, `duplicates_of` and the misses' repeats.

Why not one join ordered by distance: the planner chose between walking the matching facts
(facts first, a distance each, a sort) and walking the graph (vectors first, each checked
against its fact) by its estimate of how many facts match, and that estimate is wrong both
ways: `project IS NOT DISTINCT FROM NULL` is estimated at one row when every fact of the bank
has no project, so an add walked every fact of its category (30k buffers at 10k facts, 390k at
100k), while asyncpg's generic plan, once chosen, walked the graph for a category of 100 facts
among 100k until hnsw.max_scan_tuples and still missed half of them
(evals/reports/2026-12-05/near.md). So the road is chosen here, from a count that cannot be
wrong:

- at most FEW facts match: the exact scan over them (facts first; a distance per fact), in
  the same statement that counts them (`few`);
- more: the graph drives (the filter is a scalar subquery on each vector the scan yields, which
  the planner cannot turn into a join and reorder), iterative scans reading on until POOL
  vectors pass, re-ranked by exact distance; should the scan stop early
  (hnsw.max_scan_tuples) with fewer than `limit`, the exact scan answers instead.

The exact road answers what an exact scan answers; the graph road what the graph finds
(tests/integration/test_nearest.py compares both with an exact scan in a bank whose nearest
vectors belong to other categories, projects and statuses; evals/bench_near.py counts how
often they agree at 10k and 100k facts).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

# Up to this many matching facts the exact scan is the cheaper road: about 4.5 buffers a
# matching fact against a graph walk of 900-5,000 buffers (evals/bench_near.py); past it the
# count stops reading (FEW + 1 fact rows, about 15 buffers).
FEW = 200
# Vectors the graph proposes before the exact re-rank: iterative scans in relaxed order return
# candidates only roughly by distance, so more than `limit` are read and sorted (20 cost 55%
# more buffers than 10 for a project of 4% of 10k facts, with the same answers).
POOL = 10
# The graph's candidate list (hnsw.ef_search). On the bench's clustered synthetic bank at 100k
# facts the top 5 equalled the exact scan's for 37% of adds at 100, 80% at 400 (2,500 against
# 5,200 buffers); at 10k, 100% from 100 (75% at pgvector's default 40).
EF_SEARCH = 400


def _filter(place: bool, statuses: bool, exclude: bool, first: int) -> str:
    """The filter on `f` (facts) for these conditions, its parameters numbered from `first`."""
    parts, n = ["TRUE"], first
    if place:
        parts.append(f"f.category = ${n} AND f.project IS NOT DISTINCT FROM ${n + 1}")
        n += 2
    if statuses:
        parts.append(f"f.status = ANY(${n}::text[])")
        n += 1
    if exclude:
        parts.append(f"f.id <> ${n}")
    return " AND ".join(parts)


def queries(place: bool, statuses: bool, exclude: bool, limit: int) -> dict[str, str]:
    """The statements, by name, each taking the bank, the vector, then the filter's values.

    `few`: the exact scan over at most FEW + 1 matching facts, each row with how many there
    were (`matching`); past FEW the vectors are not read (the lateral lookup's condition is
    its own one-time filter: OFFSET 0 keeps it from being merged into the join) and every row
    says so. `graph`: vectors first; it sorts its pool by similarity, not by the distance the
    scan is ordered by: ordered by that, the planner takes the relaxed scan's order as sorted
    and reads only `limit` rows of the pool (EXPLAIN showed an incremental sort over 6 rows).
    `exact`: every matching fact, facts first (`+ 0` keeps the distance off the graph)."""
    where, limit = _filter(place, statuses, exclude, 3), int(limit)
    return {
        "few": f"""SELECT m.id, m.content, m.status, m.matching,
                          1 - (v.embedding <=> $2) AS similarity
                   FROM (SELECT f.*, count(*) OVER () AS matching
                         FROM (SELECT f.id, f.content, f.status FROM facts f
                               WHERE f.bank_id = $1 AND {where} LIMIT {FEW + 1}) f) m
                   LEFT JOIN LATERAL (SELECT v.embedding FROM fact_vectors v
                                      WHERE v.fact_id = m.id AND v.ord = 0
                                        AND m.matching <= {FEW} OFFSET 0) v ON TRUE
                   ORDER BY (v.embedding <=> $2) + 0, m.id LIMIT {limit}""",
        "graph": f"""SELECT f.id, f.content, f.status, 1 - n.distance AS similarity
                     FROM (SELECT v.fact_id, v.embedding <=> $2 AS distance
                           FROM fact_vectors v
                           WHERE v.bank_id = $1 AND v.ord = 0
                             AND (SELECT {where} FROM facts f WHERE f.id = v.fact_id)
                           ORDER BY v.embedding <=> $2 LIMIT {max(POOL, limit)}) n
                     JOIN facts f ON f.id = n.fact_id
                     ORDER BY similarity DESC, f.id LIMIT {limit}""",
        "exact": f"""SELECT f.id, f.content, f.status, 1 - (v.embedding <=> $2) AS similarity
                     FROM facts f JOIN fact_vectors v ON v.fact_id = f.id AND v.ord = 0
                     WHERE f.bank_id = $1 AND {where}
                     ORDER BY (v.embedding <=> $2) + 0, f.id LIMIT {limit}""",
    }


async def nearest_own(
    conn: asyncpg.Connection,
    bank_id: int,
    vector: object,
    *,
    place: tuple[str, str | None] | None = None,
    statuses: Sequence[str] | None = None,
    exclude: int | None = None,
    limit: int = 5,
) -> list[asyncpg.Record]:
    """The `limit` facts of the bank nearest `vector` by their own vector, nearest first, as
    rows (id, content, status, similarity), among those in `place` (category, project) when
    given, with one of `statuses` when given, other than `exclude` when given."""
    sql = queries(place is not None, statuses is not None, exclude is not None, limit)
    args: list[object] = []
    if place is not None:
        args += list(place)
    if statuses is not None:
        args.append(list(statuses))
    if exclude is not None:
        args.append(exclude)
    async with conn.transaction():
        rows = await conn.fetch(sql["few"], bank_id, vector, *args)
        if not rows or rows[0]["matching"] <= FEW:
            return [r for r in rows if r["similarity"] is not None]
        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        await conn.execute(f"SET LOCAL hnsw.ef_search = {EF_SEARCH}")
        rows = list(await conn.fetch(sql["graph"], bank_id, vector, *args))
        if len(rows) < limit:
            rows = list(await conn.fetch(sql["exact"], bank_id, vector, *args))
        return rows
