"""The retired match: a new fact whose claim the bank already superseded or deleted is not
stored again; the answer names the fact that holds now and how to store the claim again."""

from __future__ import annotations

import asyncio

import asyncpg

from factbank.models import Fact, Via
from factbank.store import facts, nearest
from factbank.text import claims
from factbank.text.claims import NEAR
from factbank.write.gate import Prepared
from factbank.write.retain.gating import Vectors

RETIRED = ("superseded", "deleted")


async def retired_match(
    conn: asyncpg.Connection, bank_id: int, p: Prepared, vectors: Vectors
) -> int | None:
    """A fact of the bank, retired (superseded or deleted), that makes the same claim as `p`
    ("add X, supersede it with Y, add X again" stored X as a new active fact that
    ranked first). The same normalised text, then the nearest retired facts by meaning
    (cosine >= NEAR) that `claims.compare` calls the same claim. Asked only when no active fact
    makes the claim, so an add that reinforces pays nothing more."""
    exact = await conn.fetchval(
        """SELECT id FROM facts WHERE bank_id = $1 AND content_hash = $4 AND category = $2
             AND project IS NOT DISTINCT FROM $3 AND status IN ('superseded', 'deleted')
           ORDER BY id DESC LIMIT 1""",
        bank_id, p.category, p.project, p.content_hash,
    )
    if exact is not None or vectors.fact is None:
        return exact
    # The nearest facts in any status, the retired kept: the same lookup as the active
    # near-duplicates'.
    near = await nearest.nearest_own(conn, bank_id, vectors.fact, place=(p.category, p.project))
    for row in near:
        if row["status"] in RETIRED and row["similarity"] >= NEAR and (
            await asyncio.to_thread(claims.compare, p.content, row["content"])
        ).same_claim:
            return row["id"]
    return None


async def retired_answer(
    conn: asyncpg.Connection, bank_id: int, fact_id: int
) -> tuple[Fact | None, Via, str]:
    """What an add of a retired claim answers: the fact that holds now (following the
    supersede chain; None when the chain ends in a delete), the link with its reason, and a
    note saying how to store the claim again (an explicit supersede)."""
    row = await conn.fetchrow(
        "SELECT id, status, superseded_by, supersede_reason FROM facts WHERE id = $1", fact_id
    )
    via = Via(superseded=fact_id, reason=row["supersede_reason"])
    seen = {fact_id}
    while row["superseded_by"] is not None and row["superseded_by"] not in seen:
        seen.add(row["superseded_by"])
        nxt = await conn.fetchrow(
            "SELECT id, status, superseded_by FROM facts WHERE bank_id = $1 AND id = $2",
            bank_id, row["superseded_by"],
        )
        if nxt is None:
            break
        row = nxt
    if row["status"] in RETIRED or row["id"] == fact_id:
        why = await conn.fetchval(
            "SELECT reason FROM fact_events WHERE fact_id = $1 AND kind = 'deleted' "
            "ORDER BY id DESC LIMIT 1",
            row["id"],
        )
        via = Via(superseded=fact_id, reason=via.reason or why or None)
        return None, via, (
            f"not stored: this claim was deleted as #{row['id']}"
            + (f" ({why})" if why else "")
            + f"; to store it again, supersede #{row['id']} with it"
        )
    successor = await facts.get_fact(conn, bank_id, row["id"])
    return successor, via, (
        f"not stored: this claim was superseded (#{fact_id} -> #{row['id']}"
        + (f": {via.reason}" if via.reason else "")
        + f"); to store it again, supersede #{row['id']} with it"
    )
