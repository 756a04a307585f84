"""Near-duplicates: the active facts of the same bank, category and project that a new fact
may repeat (the same normalised text, or cosine >= NEAR by their own vector); whether one
makes the same claim is `claims.compare`'s to say
(docs/principles.md#corrections-do-not-reinforce)."""

from __future__ import annotations

import asyncpg

from factbank.text.claims import NEAR
from factbank.write.gate import Prepared
from factbank.write.retain.gating import Vectors

# The facts of a bank, category and project nearest a vector, by their own vector (ord 0 in
# fact_vectors, the one vector store: migration 0014), through the one HNSW index. `statuses`:
# an extra condition on the fact's status. The index scan filters bank and ord, the join the
# rest; iterative scans keep reading the graph until five rows pass.
NEAREST_OWN = """SELECT f.id, f.content, f.status, 1 - (v.embedding <=> $4) AS similarity
                 FROM fact_vectors v JOIN facts f ON f.id = v.fact_id
                 WHERE v.bank_id = $1 AND v.ord = 0 AND f.category = $2
                   AND f.project IS NOT DISTINCT FROM $3 {statuses}
                 ORDER BY v.embedding <=> $4 LIMIT 5"""


async def near_duplicates(
    conn: asyncpg.Connection, bank_id: int, p: Prepared, vectors: Vectors
) -> list[asyncpg.Record]:
    """Same bank, category and project: the same normalised text first, then the nearest by
    cosine >= NEAR (an index lookup and an HNSW scan, never a pass over the whole bank)."""
    same = """SELECT id, content, 2.0 AS similarity FROM facts
              WHERE bank_id = $1 AND content_hash = $4 AND category = $2
                AND project IS NOT DISTINCT FROM $3 AND status IN ('active', 'disputed')"""
    rows = list(await conn.fetch(same, bank_id, p.category, p.project, p.content_hash))
    vector = vectors.fact
    if vector is not None:
        async with conn.transaction():
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            near = await conn.fetch(
                NEAREST_OWN.format(statuses="AND f.status IN ('active', 'disputed')"),
                bank_id,
                p.category,
                p.project,
                vector,
            )
        known = {r["id"] for r in rows}
        rows += [r for r in near if r["similarity"] >= NEAR and r["id"] not in known]
    return rows
