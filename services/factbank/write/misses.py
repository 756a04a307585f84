"""Miss counting: record each repeat (a write whose claim the bank already held), whether the
writing session had been shown the held fact, and the corrections the prompt hook recognised.

The measure is the design's own, taken in real use rather than on a benchmark: over weeks
before and after a change, how often did a person have to tell the bank (through an agent)
what it already knew, and how often the same correction twice. A repeat is classified by what
the session saw of the held fact (`fact_exposures`, the durable inject log):

* never shown            -> a recall miss (the memory had it and did not bring it up);
* injected, or found by a search in the session -> a presentation miss (it was in front of
  the agent, which repeated it anyway);
* a correction the user had to give twice -> a repeated correction.

Kinds: the same claim saved again (a reinforce), a correction (a supersede), a fact stored
although an equivalent one existed elsewhere in the bank (`equivalents`), and a claim the bank
had retired (answered with its successor).

Everything here runs inside the write's own transaction (a repeat is recorded exactly when
its write commits) or, for the read side (exposures, nudges), is best effort: a failure is
logged and counted, never costs the block or the search it records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import asyncpg

from factbank.observability import digest_of
from factbank.store import nearest
from factbank.store.ceremony import Write

log = logging.getLogger(__name__)

KINDS = ("same", "correction", "equivalent", "retired")
# The logs written on a read's path (exposures, nudges) commit without waiting for the WAL
# flush: visible to the next write at once, at worst lost in a crash. Waiting for the flush
# put a commit's fsync on every prompt's path; on the loaded test machine the prompt hook's
# wall p50 for a recognised correction was 93-96 ms above the same prompt without it (two
# runs of `factbank eval corrections --ab 80`).
ASYNC_COMMIT = "SET LOCAL synchronous_commit = off"
SHOWN = ("injected", "searched", "never", "unknown")


def session_key(session: str) -> str:
    """What the logs keep of a harness session id: a digest (as the result cache keys a
    session's seen set), never the header or body text itself, which a caller controls and
    could carry a secret (docs/misses.md). The same id gives the same key on every path
    (inject's body `session_id`, the X-Factbank-Session header of writes and searches)."""
    if not session:
        return ""
    return digest_of(session)


async def shown(conn: asyncpg.Connection, bank_id: int, session: str, fact_id: int) -> str:
    """What the session saw of the fact: injected beats searched beats never."""
    if not session:
        return "unknown"
    vias = {
        r["via"]
        for r in await conn.fetch(
            "SELECT via FROM fact_exposures WHERE bank_id = $1 AND session_key = $2 "
            "AND fact_id = $3",
            bank_id, session, fact_id,
        )
    }
    return "injected" if "inject" in vias else "searched" if "search" in vias else "never"


async def nudged(conn: asyncpg.Connection, bank_id: int, session: str) -> bool:
    """Did the prompt hook recognise a correction in this session before now?"""
    if not session:
        return False
    return bool(await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM correction_nudges WHERE bank_id = $1 "
        "AND session_key = $2)",
        bank_id, session,
    ))


async def record_repeat(
    w: Write, kind: str, held: int, new: int | None, project: str | None, agent: str
) -> None:
    """One repeat of fact `held` by this write (`new`: the fact it stored, if any)."""
    conn, bank_id, session = w.conn, w.bank_id, session_key(w.principal.session)
    row = await conn.fetchrow(
        """SELECT
             EXISTS (SELECT 1 FROM session_writes WHERE fact_id = $1 AND nudged) AS nudged_fact,
             EXISTS (SELECT 1 FROM session_writes WHERE fact_id = $1
                       AND (nudged OR action = 'superseded'))
             OR EXISTS (SELECT 1 FROM facts WHERE superseded_by = $1) AS was_correction""",
        held,
    )
    now_nudged = await nudged(conn, bank_id, session)
    correcting = kind == "correction" or now_nudged
    await conn.execute(
        """INSERT INTO repeats (bank_id, kind, fact_id, new_fact_id, session_key, project,
                                member_id, agent, shown, nudged, nudged_fact,
                                repeated_correction)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)""",
        bank_id, kind, held, new, session or None, project, w.principal.member_id, agent,
        await shown(conn, bank_id, session, held), now_nudged, row["nudged_fact"],
        bool(row["was_correction"] and correcting),
    )


async def record_write(w: Write, fact_id: int, action: str) -> None:
    """A write made in a session (nothing outside one): the fact it left and whether a
    correction had been recognised in the session before it."""
    session = session_key(w.principal.session)
    if not session:
        return
    await w.conn.execute(
        "INSERT INTO session_writes (bank_id, session_key, fact_id, action, nudged) "
        "VALUES ($1, $2, $3, $4, $5)",
        w.bank_id, session, fact_id, action, await nudged(w.conn, w.bank_id, session),
    )


async def after_add(
    w: Write, status: str, fact_id: int, possible: Sequence[int], project: str | None,
    agent: str,
) -> None:
    """What one retained fact of an add (`retain.add_many`) records."""
    if status == "reinforced":
        await record_repeat(w, "same", fact_id, None, project, agent)
        await record_write(w, fact_id, "reinforced")
    elif status == "retired":
        await record_repeat(w, "retired", fact_id, None, project, agent)
    elif status == "stored":
        del possible  # different claims on the subject: the answer says "supersede it?"
        for held in await equivalents(w.conn, w.bank_id, fact_id):
            await record_repeat(w, "equivalent", held, fact_id, project, agent)
        await record_write(w, fact_id, "stored")


async def equivalents(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> list[int]:
    """Active facts of the bank that make the same claim as the fact just stored, in any
    category or project (in the same ones the claim would have reinforced, not been stored):
    the same text, or the nearest by meaning (cosine >= retain.NEAR) that `claims.compare`
    calls the same claim. A near-duplicate that is a different claim ("port 8081" after
    "port 8080", or worker pool 2 after pool 1) is not a repeat: the add's answer already
    names it as a possible supersede. Measured on the browser fixture's 26 similar worker
    pools: counting every possible duplicate gave 117 "repeats" for 0 real ones."""
    from factbank.text import claims
    from factbank.text.claims import NEAR

    row = await conn.fetchrow(
        "SELECT f.content, f.content_hash, v.embedding FROM facts f "
        "LEFT JOIN fact_vectors v ON v.fact_id = f.id AND v.ord = 0 WHERE f.id = $1", fact_id)
    same = [r["id"] for r in await conn.fetch(
        "SELECT id FROM facts WHERE bank_id = $1 AND content_hash = $2 AND id <> $3 "
        "AND status IN ('active', 'disputed') ORDER BY id", bank_id, row["content_hash"],
        fact_id)]
    if row["embedding"] is None:
        return same
    near = await nearest.nearest_own(conn, bank_id, row["embedding"],
                                     statuses=("active", "disputed"), exclude=fact_id)
    for r in near:
        if r["id"] not in same and r["similarity"] >= NEAR and (
            await asyncio.to_thread(claims.compare, row["content"], r["content"])
        ).same_claim:
            same.append(r["id"])
    return same


async def after_supersede(
    w: Write, new_id: int, olds: Sequence[int], project: str | None, agent: str
) -> None:
    """What a supersede records: a correction of each fact it retires."""
    for held in olds:
        await record_repeat(w, "correction", held, new_id, project, agent)
    await record_write(w, new_id, "superseded")


async def record_exposures(
    pool: asyncpg.Pool, bank_id: int, session: str, fact_ids: Sequence[int], via: str
) -> None:
    """Facts shown to a session (an inject block, a search's results). Best effort."""
    session = session_key(session)
    if not session or not fact_ids:
        return
    try:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(ASYNC_COMMIT)
            await conn.execute(
                """INSERT INTO fact_exposures (bank_id, session_key, fact_id, via)
                   SELECT $1, $2, f.id, $4 FROM facts f
                   WHERE f.bank_id = $1 AND f.id = ANY($3::bigint[])
                   ON CONFLICT DO NOTHING""",
                bank_id, session, list(dict.fromkeys(fact_ids)), via,
            )
    except Exception:  # the inject log must never cost the block it logs
        log.exception("recording the facts shown to a session failed")


async def record_nudge(pool: asyncpg.Pool, bank_id: int, session: str, fact_id: int | None) -> None:
    """A correction the prompt hook recognised in this session, naming `fact_id`. Best
    effort; one INSERT on the prompt's path (nothing else: no text is stored)."""
    session = session_key(session)
    if not session:
        return
    try:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(ASYNC_COMMIT)
            await conn.execute(
                """INSERT INTO correction_nudges (bank_id, session_key, fact_id)
                   SELECT $1, $2, (SELECT id FROM facts WHERE bank_id = $1 AND id = $3)""",
                bank_id, session, fact_id,
            )
    except Exception:
        log.exception("recording a recognised correction failed")
