"""Reading and writing fact rows. Every query is scoped by bank id: there is no other way in."""

from __future__ import annotations

import asyncio
import hashlib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec

from factbank import trust
from factbank.errors import NotFound
from factbank.models import Author, Fact, Fingerprint, Review, Source, Stale
from factbank.redact import redaction
from factbank.store import nearest

# `cites`: a derived fact's sources, one primary-key lookup in fact_citations per row.
# `lang`: the language of the fact's own text as its vector was stored (fact_vectors ord 0,
# one primary-key lookup; None while the vector is queued), so recall never detects it again.
FACT_SELECT = """
SELECT f.*, b.name AS bank, m.name AS member, c.decays,
       ARRAY(SELECT fc.cites FROM fact_citations fc WHERE fc.fact_id = f.id ORDER BY fc.cites)
           AS cites,
       (SELECT fv.lang FROM fact_vectors fv WHERE fv.fact_id = f.id AND fv.ord = 0) AS lang
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
        fingerprint=_fingerprint(row["fingerprint"]),
        stale=Stale(
            reason=row["stale_reason"] or "",
            context=row["stale_context"] or "",
            since=row["stale_since"],
        )
        if row["status"] == "stale" and row["stale_since"] is not None
        else None,
        review=Review(
            reason=row["review_reason"] or "", cause=row["review_cause"], since=row["review_since"]
        )
        if row["review_since"] is not None
        else None,
        cites=list(row["cites"] or []),
        verified_at=row["verified_at"],
    )


def _fingerprint(value: str | dict | None) -> Fingerprint | None:
    """The stored JSON back into its shape (asyncpg hands jsonb over as text)."""
    if value is None:
        return None
    raw = value.encode() if isinstance(value, str) else msgspec.json.encode(value)
    return msgspec.json.decode(raw, type=Fingerprint)


def fingerprint_json(fp: Fingerprint | dict | None) -> str | None:
    """A fingerprint as the jsonb parameter asyncpg takes (text)."""
    return None if fp is None else msgspec.json.encode(fp).decode()


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


async def get_facts(conn: asyncpg.Connection, bank_id: int, ids: Sequence[int]) -> list[Fact]:
    """Facts by id in one query, in the order asked (every id must be in the bank)."""
    rows = await conn.fetch(FACT_SELECT + " WHERE f.bank_id = $1 AND f.id = ANY($2::bigint[])",
                            bank_id, list(set(ids)))
    now = datetime.now(UTC)
    by_id = {r["id"]: to_fact(r, now) for r in rows}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise NotFound(f"no fact #{missing[0]} in this bank")
    return [by_id[i] for i in ids]


async def list_facts(
    conn: asyncpg.Connection,
    bank_id: int,
    *,
    status: str | None = None,
    category: str | None = None,
    project: str | None = None,
    after: int = 0,
    limit: int = 100,
    statuses: Sequence[str] | None = None,
    source_kinds: Sequence[str] | None = None,
    tag: str | None = None,
    newest_first: bool = False,
) -> tuple[list[Fact], int | None]:
    """A page of a bank's facts in id order; deleted facts only when asked for by status
    (`status`, or any of `statuses`). `source_kinds`: only facts with one of these sources
    (verify pages a project's `file` and `commit` facts, stale ones included). `tag`: facts
    carrying that tag. `newest_first` (the dashboard's list): descending ids, `after` then
    being the last id seen (0: from the newest); the primary key walks either way, so a
    page deep into 100k facts costs what the first does (evals/bench_dashboard.py)."""
    wanted = [status] if status is not None else list(statuses) if statuses else None
    cursor = "($2 = 0 OR f.id < $2)" if newest_first else "f.id > $2"
    rows = await conn.fetch(
        FACT_SELECT
        + f""" WHERE f.bank_id = $1 AND {cursor}
              AND ($3::text[] IS NULL AND f.status <> 'deleted' OR f.status = ANY($3))
              AND ($4::text IS NULL OR f.category = $4)
              AND ($5::text IS NULL OR f.project = $5)
              AND ($7::text[] IS NULL OR f.source_kind = ANY($7))
              AND ($8::text IS NULL OR f.tags @> ARRAY[$8::text])
            ORDER BY f.id {"DESC" if newest_first else ""} LIMIT $6""",
        bank_id,
        after,
        wanted,
        category,
        project,
        limit + 1,
        list(source_kinds) if source_kinds else None,
        tag,
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
    project: str | None = None,
    remotes: Sequence[str] = (),
) -> None:
    """One row of a fact's history: every trust change and lifecycle step, with who and why
    (a confirm also where: the caller's project key and its repository's remotes).

    The reason and agent are redacted here, whoever wrote them: this is the one door into
    `fact_events`, and a secret that lands there stays until the fact is purged. (Write paths
    clean them earlier under the bank's policy; this is the last step, always `redact`.)"""
    if reason or agent or project or remotes:
        reason, agent, project, remotes = await asyncio.to_thread(
            _clean_event_text, reason, agent, project, remotes
        )
    await conn.execute(
        """INSERT INTO fact_events (fact_id, bank_id, kind, trust_before, trust_after, member_id,
                                    agent, reason, related_fact, project, remotes)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)""",
        fact_id,
        bank_id,
        kind,
        before,
        after,
        member_id,
        agent,
        reason,
        related,
        project,
        list(remotes),
    )


@dataclass(frozen=True)
class Event:
    """One row of a fact's history, for `record_events` (the bulk door of `fact_events`)."""

    fact_id: int
    kind: str
    before: float | None
    after: float | None
    member_id: int | None
    agent: str = ""
    reason: str = ""
    related: int | None = None


async def record_events(conn: asyncpg.Connection, bank_id: int, rows: Sequence[Event]) -> None:
    """Many rows of history in one COPY, redacted exactly as `record_event` redacts one.

    A chunk of 1,000 imported facts wrote its "created" events one INSERT at a time, a round
    trip each; their reasons repeat ("origin verified"), so each distinct (reason, agent) is
    redacted once, in a thread, and the rows go in one COPY."""
    if not rows:
        return
    distinct = list(dict.fromkeys((e.reason, e.agent) for e in rows))

    def clean_all() -> dict[tuple[str, str], tuple[str, str]]:
        out = {}
        for reason, agent in distinct:
            r, a, _, _ = _clean_event_text(reason, agent, None, ())
            out[(reason, agent)] = (r, a)
        return out

    clean = await asyncio.to_thread(clean_all)
    await conn.copy_records_to_table(
        "fact_events",
        columns=["fact_id", "bank_id", "kind", "trust_before", "trust_after", "member_id",
                 "agent", "reason", "related_fact"],
        records=[
            (e.fact_id, bank_id, e.kind, e.before, e.after, e.member_id,
             clean[(e.reason, e.agent)][1], clean[(e.reason, e.agent)][0], e.related)
            for e in rows
        ],
    )


def _clean_event_text(
    reason: str, agent: str, project: str | None, remotes: Sequence[str]
) -> tuple[str, str, str | None, list[str]]:
    clean = redaction.redact_fields(
        {"reason": reason, "agent": agent, "project": project, "remotes": list(remotes)}
    )[0]
    return (
        str(clean["reason"]),
        str(clean["agent"]),
        clean["project"],  # type: ignore[return-value]
        list(clean["remotes"] or []),
    )


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
        # Facts whose vectors an import queued and the embedder worker has not filled yet
        # (found by the lexical leg meanwhile). Per bank: /readyz is open, so it shows none.
        "vectors_pending": await conn.fetchval(
            "SELECT count(*) FROM vector_queue WHERE bank_id = $1", bank_id
        ),
    }


async def growth(conn: asyncpg.Connection, bank_id: int, days: int = 30) -> list[dict]:
    """Facts created per day over the last `days` days (deleted ones included: growth is
    what was written), oldest first, days without a write answered as 0. One range scan of
    the (bank_id, created_at) index grouped by day; the days are filled in here (a
    generate_series joined on a range made the planner compare every fact with every day:
    781 ms p50 for the health page at 100k facts, evals/reports/2026-12-02)."""
    today = datetime.now(UTC).date()
    first = datetime.combine(today - timedelta(days=days - 1), datetime.min.time(), UTC)
    rows = await conn.fetch(
        """SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS created
           FROM facts WHERE bank_id = $1 AND created_at >= $2 GROUP BY 1""",
        bank_id,
        first,
    )
    counts = {r["day"]: r["created"] for r in rows}
    return [{"day": (d := today - timedelta(days=days - 1 - i)).isoformat(),
             "created": counts.get(d, 0)} for i in range(days)]


async def duplicates_of(
    conn: asyncpg.Connection, bank_id: int, fact_id: int, near: float, limit: int = 5
) -> list[dict]:
    """The facts a stored fact may duplicate, as the write gate judges a new one
    (`retain.near.near_duplicates`): same category and project, live, the same normalised text or
    a cosine of at least `near` between the stored embeddings (`nearest.nearest_own`), itself
    left out, most similar first."""
    fact = await conn.fetchrow(
        "SELECT category, project, content_hash, (SELECT embedding FROM fact_vectors "
        "WHERE fact_id = $2 AND ord = 0) AS embedding FROM facts WHERE bank_id = $1 AND id = $2",
        bank_id,
        fact_id,
    )
    if fact is None:
        raise NotFound(f"no fact with id {fact_id}")
    live = ("active", "disputed", "stale")
    rows = list(await conn.fetch(
        """SELECT id, content, status, 1.0::float8 AS similarity FROM facts
           WHERE bank_id = $1 AND id <> $2 AND content_hash = $5 AND category = $3
             AND project IS NOT DISTINCT FROM $4 AND status = ANY($6::text[])""",
        bank_id, fact_id, fact["category"], fact["project"], fact["content_hash"], list(live),
    ))
    if fact["embedding"] is not None:
        rows += await nearest.nearest_own(
            conn, bank_id, fact["embedding"], place=(fact["category"], fact["project"]),
            statuses=live, exclude=fact_id, limit=limit,
        )
    seen: set[int] = set()
    out = []
    for r in sorted(rows, key=lambda r: -r["similarity"]):
        if r["id"] not in seen and r["similarity"] >= near:
            seen.add(r["id"])
            out.append({"id": r["id"], "content": r["content"], "status": r["status"],
                        "similarity": round(float(r["similarity"]), 4)})
    return out[:limit]


async def events(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> list[dict]:
    rows = await conn.fetch(
        """SELECT e.id, e.kind, e.trust_before, e.trust_after, m.name AS member, e.agent,
                  e.reason, e.related_fact, e.created_at, e.project, e.remotes
           FROM fact_events e LEFT JOIN members m ON m.id = e.member_id
           WHERE e.bank_id = $1 AND e.fact_id = $2 ORDER BY e.id""",
        bank_id,
        fact_id,
    )
    return [dict(r) for r in rows]
