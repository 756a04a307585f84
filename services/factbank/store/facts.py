"""Reading and writing fact rows. Every query is scoped by bank id: there is no other way in."""

from __future__ import annotations

import asyncio
import hashlib
import unicodedata
from datetime import UTC, datetime

import asyncpg

from factbank import trust
from factbank.errors import NotFound
from factbank.models import Author, Fact, Source
from factbank.write import redaction

FACT_SELECT = """
SELECT f.*, b.name AS bank, m.name AS member, c.decays
FROM facts f
JOIN banks b ON b.id = f.bank_id
JOIN members m ON m.id = f.created_by_member
JOIN categories c ON c.bank_id = f.bank_id AND c.name = f.category
"""


def content_hash(content: str) -> bytes:
    """Hash of the normalised text: the same words in other whitespace/case are one fact."""
    norm = " ".join(unicodedata.normalize("NFKC", content).casefold().split())
    return hashlib.sha256(norm.encode()).digest()


def effective_trust(row: asyncpg.Record | dict, now: datetime | None = None) -> float:
    return trust.DEFAULT.effective(
        row["trust"], row["confirmed_at"], now or datetime.now(UTC), bool(row["decays"])
    )


def to_fact(row: asyncpg.Record | dict, now: datetime | None = None) -> Fact:
    return Fact(
        id=row["id"],
        bank=row["bank"],
        content=row["content"],
        category=row["category"],
        tags=list(row["tags"]),
        source=Source(kind=row["source_kind"], location=row["source_location"]),
        quote=row["quote"],
        project=row["project"],
        origin=row["origin"],
        tentative=row["tentative"],
        trust=row["trust"],
        effective_trust=round(effective_trust(row, now), 4),
        status=row["status"],
        superseded_by=row["superseded_by"],
        supersede_reason=row["supersede_reason"],
        created_by=Author(member=row["member"], agent=row["created_by_agent"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        confirmed_at=row["confirmed_at"],
        questions=list(row["questions"]),
    )


async def get_row(conn: asyncpg.Connection, bank_id: int, fact_id: int, *, lock: bool = False):
    sql = FACT_SELECT + " WHERE f.bank_id = $1 AND f.id = $2"
    if lock:
        sql += " FOR UPDATE OF f"
    row = await conn.fetchrow(sql, bank_id, fact_id)
    if row is None:
        raise NotFound(f"no fact #{fact_id} in this bank")
    return row


async def get_fact(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> Fact:
    return to_fact(await get_row(conn, bank_id, fact_id))


async def list_facts(
    conn: asyncpg.Connection,
    bank_id: int,
    *,
    status: str | None = None,
    category: str | None = None,
    project: str | None = None,
    after: int = 0,
    limit: int = 100,
) -> tuple[list[Fact], int | None]:
    """A page of a bank's facts in id order; deleted facts only when asked for by status."""
    rows = await conn.fetch(
        FACT_SELECT
        + """ WHERE f.bank_id = $1 AND f.id > $2
              AND ($3::text IS NULL AND f.status <> 'deleted' OR f.status = $3)
              AND ($4::text IS NULL OR f.category = $4)
              AND ($5::text IS NULL OR f.project = $5)
            ORDER BY f.id LIMIT $6""",
        bank_id,
        after,
        status,
        category,
        project,
        limit + 1,
    )
    now = datetime.now(UTC)
    facts = [to_fact(r, now) for r in rows[:limit]]
    next_cursor = facts[-1].id if len(rows) > limit else None
    return facts, next_cursor


async def category_exists(conn: asyncpg.Connection, bank_id: int, name: str) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT 1 FROM categories WHERE bank_id = $1 AND name = $2", bank_id, name
        )
    )


async def record_event(
    conn: asyncpg.Connection,
    fact_id: int,
    bank_id: int,
    kind: str,
    *,
    before: float | None,
    after: float | None,
    member_id: int | None,
    agent: str = "",
    reason: str = "",
    related: int | None = None,
) -> None:
    """One row of a fact's history: every trust change and lifecycle step, with who and why.

    The reason and agent are redacted here, whoever wrote them: this is the one door into
    `fact_events`, and a secret that lands there stays until the fact is purged. (Write paths
    clean them earlier under the bank's policy; this is the last step, always `redact`.)"""
    if reason or agent:
        reason, agent = await asyncio.to_thread(_clean_event_text, reason, agent)
    await conn.execute(
        """INSERT INTO fact_events (fact_id, bank_id, kind, trust_before, trust_after, member_id,
                                    agent, reason, related_fact)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
        fact_id,
        bank_id,
        kind,
        before,
        after,
        member_id,
        agent,
        reason,
        related,
    )


def _clean_event_text(reason: str, agent: str) -> tuple[str, str]:
    return redaction.clean_text("reason", reason), redaction.clean_text("agent", agent)


async def lock_bank(conn: asyncpg.Connection, bank_id: int) -> None:
    """Take the bank's row lock first, in every write transaction. Writers touch the bank row
    (BM25 statistics, the version), the audit chain's lock and fact rows; taking the bank row
    before anything else gives all of them one order, so two writers take turns instead of
    deadlocking (a judge holding the audit lock while an add held the bank row: 5xx under
    the load drill's concurrent confirms and adds)."""
    await conn.execute("SELECT 1 FROM banks WHERE id = $1 FOR NO KEY UPDATE", bank_id)


async def bump_version(conn: asyncpg.Connection, bank_id: int) -> None:
    """Every write bumps the bank's version; recall caches key on it, so reads see the write."""
    await conn.execute("UPDATE banks SET version = version + 1 WHERE id = $1", bank_id)


async def bank_version(conn: asyncpg.Connection, bank_id: int) -> int | None:
    """The bank's version as `bump_version` left it (None: no such bank)."""
    return await conn.fetchval("SELECT version FROM banks WHERE id = $1", bank_id)


async def bank_stats(conn: asyncpg.Connection, bank_id: int) -> dict:
    """A bank's name, kind and version, its facts by status and its lexical index size."""
    by_status = await conn.fetch(
        "SELECT status, count(*) AS n FROM facts WHERE bank_id = $1 GROUP BY status", bank_id
    )
    bank = await conn.fetchrow(
        "SELECT name, kind, version, doc_count, total_len FROM banks WHERE id = $1", bank_id
    )
    return {
        "bank": bank["name"],
        "kind": bank["kind"],
        "version": bank["version"],
        "facts": {r["status"]: r["n"] for r in by_status},
        "index": {"documents": bank["doc_count"], "tokens": bank["total_len"]},
    }


async def events(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> list[dict]:
    rows = await conn.fetch(
        """SELECT e.id, e.kind, e.trust_before, e.trust_after, m.name AS member, e.agent,
                  e.reason, e.related_fact, e.created_at
           FROM fact_events e LEFT JOIN members m ON m.id = e.member_id
           WHERE e.bank_id = $1 AND e.fact_id = $2 ORDER BY e.id""",
        bank_id,
        fact_id,
    )
    return [dict(r) for r in rows]
