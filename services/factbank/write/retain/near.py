"""Near-duplicates: the active facts of the same bank, category and project that a new fact
may repeat (the same normalised text, or cosine >= NEAR by their own vector); whether one
makes the same claim is `claims.compare`'s to say
(docs/principles.md#corrections-do-not-reinforce)."""

from __future__ import annotations

import asyncpg

from factbank.store import nearest
from factbank.text.claims import NEAR
from factbank.write.gate import Prepared
from factbank.write.retain.gating import Vectors


async def near_duplicates(
    conn: asyncpg.Connection, bank_id: int, p: Prepared, vectors: Vectors
) -> list[asyncpg.Record]:
    """Same bank, category and project: the same normalised text first, then the nearest by
    cosine >= NEAR (an index lookup and `store.nearest`, never a pass over the whole bank)."""
    same = """SELECT id, content, 2.0 AS similarity FROM facts
              WHERE bank_id = $1 AND content_hash = $4 AND category = $2
                AND project IS NOT DISTINCT FROM $3 AND status IN ('active', 'disputed')"""
    rows = list(await conn.fetch(same, bank_id, p.category, p.project, p.content_hash))
    vector = vectors.fact
    if vector is not None:
        near = await nearest.nearest_own(conn, bank_id, vector, place=(p.category, p.project),
                                         statuses=("active", "disputed"))
        known = {r["id"] for r in rows}
        rows += [r for r in near if r["similarity"] >= NEAR and r["id"] not in known]
    return rows
