"""Derived facts: a fact whose source is other facts, and the review cascade that
follows when one of those changes.

A fact with `source.kind = fact` cites facts of its bank (the gate checks they exist, still
hold and contain the quote: `gate.check_citations`); the citations are rows of
`fact_citations`. When a cited fact is superseded, turns stale or is deleted (or purged), every
fact that cites it, directly or through other derived facts, is flagged for review in the same
transaction: `review` set (cause = the fact that changed), event `flagged`. A flagged fact stays
searchable, marked, and is never injected until someone confirms it (`lifecycle.confirm`
clears the flag, event `reviewed`).

The walk is one recursive query over `fact_citations` from the cited side. `UNION` (not
`UNION ALL`) keeps each fact once, so a cycle ends the recursion instead of looping (the API
cannot make one, since a fact only cites facts that existed before it, but an import or a hand
edit could), and `MAX_FLAGGED` bounds it: Postgres stops a recursive query at the outer LIMIT.
A fact already under review keeps its first flag (one review clears it); retired facts
(superseded, deleted) are not flagged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import asyncpg

from factbank.models import NewFact
from factbank.observability import STALENESS
from factbank.store import ceremony
from factbank.write import gate

MAX_FLAGGED = 1000
MAX_REASON_CHARS = 1000

_DEPENDENTS = """
WITH RECURSIVE dependents(id) AS (
    SELECT fact_id FROM fact_citations WHERE bank_id = $1 AND cites = $2
    UNION
    SELECT c.fact_id FROM fact_citations c JOIN dependents d ON c.cites = d.id
    WHERE c.bank_id = $1
)
SELECT id FROM dependents WHERE id <> $2 LIMIT $3
"""


async def cited_rows(
    conn: asyncpg.Connection, bank_id: int, items: Iterable[NewFact]
) -> dict[int, tuple[str, str]]:
    """{id: (status, content)} of the facts the derived facts among `items` cite, in this bank
    only (what `gate.check_citations` decides on)."""
    ids = sorted(
        {
            i
            for item in items
            if item.source.kind == "fact"
            for i in gate.cited_ids(item.source.location.strip()) or []
        }
    )
    if not ids:
        return {}
    rows = await conn.fetch(
        "SELECT id, status, content FROM facts WHERE bank_id = $1 AND id = ANY($2::bigint[])",
        bank_id,
        ids,
    )
    return {r["id"]: (r["status"], r["content"]) for r in rows}


async def store_citations(
    conn: asyncpg.Connection, bank_id: int, fact_id: int, cites: Sequence[int]
) -> None:
    """Record which facts `fact_id` cites (in the caller's transaction)."""
    if cites:
        await conn.executemany(
            "INSERT INTO fact_citations (fact_id, cites, bank_id) VALUES ($1, $2, $3) "
            "ON CONFLICT DO NOTHING",
            [(fact_id, c, bank_id) for c in cites],
        )


async def dependents(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> list[int]:
    """Every fact that cites `fact_id`, directly or transitively (cycle-safe, bounded)."""
    rows = await conn.fetch(_DEPENDENTS, bank_id, fact_id, MAX_FLAGGED)
    return sorted(r["id"] for r in rows)


async def flag_dependents(
    w: ceremony.Write, cause: int, what: str, *, exclude: Iterable[int] = ()
) -> list[int]:
    """Flag for review every live fact that depends on `cause`, which just `what` ("was
    superseded", "turned stale: <why>", "was deleted"); returns the ids newly flagged."""
    skip = set(exclude)
    ids = [i for i in await dependents(w.conn, w.bank_id, cause) if i not in skip]
    if not ids:
        return []
    direct = {
        r["fact_id"]
        for r in await w.conn.fetch(
            "SELECT fact_id FROM fact_citations WHERE bank_id = $1 AND cites = $2",
            w.bank_id,
            cause,
        )
    }
    rows = await w.conn.fetch(
        """UPDATE facts SET review_reason = CASE WHEN id = ANY($5::bigint[]) THEN $3 ELSE $4 END,
                  review_cause = $6, review_since = now(), updated_at = now()
           WHERE bank_id = $1 AND id = ANY($2::bigint[]) AND review_since IS NULL
             AND status IN ('active', 'disputed', 'stale')
           RETURNING id, trust, review_reason""",
        w.bank_id,
        ids,
        f"cites #{cause}, which {what}"[:MAX_REASON_CHARS],
        f"depends on #{cause} through the facts it cites; #{cause} {what}"[:MAX_REASON_CHARS],
        sorted(direct),
        cause,
    )
    flagged = sorted((r["id"], r["trust"], r["review_reason"]) for r in rows)
    STALENESS.labels(outcome="flagged").inc(len(flagged))
    for fact_id, t, why in flagged:
        await w.event(fact_id, "flagged", before=t, after=t, reason=why, related=cause)
    return [fact_id for fact_id, _, _ in flagged]
