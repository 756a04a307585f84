"""Events: a batch of what happened in sessions, stored redacted in one transaction with the
conflicts its file events ran into; the timeline listed, and trimmed to its retention."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from factbank.store.banks import Principal
from factbank.timeline.clean import clean_event
from factbank.timeline.conflicts import batch_conflicts
from factbank.timeline.handoffs import with_handoff_text
from factbank.timeline.models import DEFAULT_RETENTION_DAYS, DEFAULT_WINDOW_MINUTES, NewEvent
from factbank.timeline.sessions import fold_sessions, upsert_sessions
from factbank.timeline.wording import Conflict, conflict_out

# How far in the future a client clock may be before its `at` is taken as now.
CLOCK_SKEW = timedelta(minutes=2)


def _when(at: datetime | None, now: datetime) -> datetime:
    if at is None:
        return now
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return min(at, now) if at > now + CLOCK_SKEW else at


def _key_digest(key: str | None) -> str | None:
    """What is stored of an event's key: a digest, so a key is never redacted into another
    key's value (a high-entropy tool id can look like a secret) and no text of it lands."""
    if key is None:
        return None
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


async def record(
    pool: asyncpg.Pool,
    user: Principal,
    events: list[NewEvent],
    policy: str,
    *,
    window_minutes: int = DEFAULT_WINDOW_MINUTES,
    retention_days: int = DEFAULT_RETENTION_DAYS,
) -> dict[str, Any]:
    """Store the events (redacted) in one transaction; for file events, find conflicts and
    record each on the timeline. Returns how many were recorded, how many the timeline held
    already (same session and key), and the conflicts found.

    A batch is a few statements whatever its size (sessions, events, conflicts, conflict
    events: one each, over arrays): a 500-event history import was ~2,000 round trips one
    event at a time. A file event is judged against the events stored before it, as if the
    batch came one event at a time (`e.id < x.id`)."""
    cleaned = await asyncio.to_thread(
        lambda: [clean_event(e, user.agent, policy) for e in events]
    )
    now = datetime.now(UTC)
    cutoff = now - timedelta(days=retention_days)
    rows = [
        (e, f, at)
        for e, f in zip(events, cleaned, strict=True)
        if (at := _when(e.at, now)) >= cutoff  # older than the timeline keeps: not stored
    ]
    found: list[Conflict] = []
    inserted: list[asyncpg.Record] = []
    async with pool.acquire() as conn, conn.transaction():
        sessions = await upsert_sessions(conn, user, fold_sessions(rows)) if rows else {}
        if rows:
            inserted = await conn.fetch(
                """INSERT INTO timeline_events
                       (bank_id, session_id, project, kind, at, agent, member, machine, branch,
                        path, tool, command, exit_code, key)
                   SELECT $1, x.sid, x.project, x.kind, x.at, s.agent, $2, s.machine,
                          s.branch, x.path, x.tool, x.command, x.exit_code, x.key
                   FROM unnest($3::bigint[], $4::text[], $5::text[], $6::timestamptz[],
                               $7::text[], $8::text[], $9::text[], $10::int[], $11::text[])
                        WITH ORDINALITY
                        AS x(sid, project, kind, at, path, tool, command, exit_code, key, ord)
                   JOIN timeline_sessions s ON s.id = x.sid
                   ORDER BY x.ord
                   ON CONFLICT (session_id, key) WHERE key IS NOT NULL DO NOTHING
                   RETURNING id, session_id, project, kind, at, path, agent, machine, branch""",
                user.bank_id,
                user.member_name,
                [sessions[f["session_id"]]["id"] for _, f, _ in rows],
                [f["project"] for _, f, _ in rows],
                [e.kind for e, _, _ in rows],
                [at for _, _, at in rows],
                [f["path"] for _, f, _ in rows],
                [f["tool"] for _, f, _ in rows],
                [f["command"] for _, f, _ in rows],
                [e.exit_code for e, _, _ in rows],
                [_key_digest(e.key) for e, _, _ in rows],
            )
            inserted = sorted(inserted, key=lambda r: r["id"])
        keys = {r["id"]: k for k, r in sessions.items()}
        files = [r for r in inserted if r["kind"] == "file" and r["project"] and r["path"]]
        if files:
            found = await batch_conflicts(conn, user.bank_id, files, keys, window_minutes)
        if found:
            await conn.execute(
                """INSERT INTO timeline_events
                       (bank_id, session_id, project, kind, at, agent, member, machine,
                        branch, path, detail, other_session)
                   SELECT $1, x.sid, x.project, 'conflict', x.at, s.agent, $2, s.machine,
                          s.branch, x.path, x.detail, x.other
                   FROM unnest($3::bigint[], $4::text[], $5::timestamptz[], $6::text[],
                               $7::text[], $8::bigint[])
                        WITH ORDINALITY AS x(sid, project, at, path, detail, other, ord)
                   JOIN timeline_sessions s ON s.id = x.sid
                   ORDER BY x.ord""",
                user.bank_id,
                user.member_name,
                [sessions[c.for_session]["id"] for c, _, _ in found],
                [p for _, p, _ in found],
                [at for _, _, at in found],
                [c.path for c, _, _ in found],
                [c.warning() for c, _, _ in found],
                [c.other_id for c, _, _ in found],
            )
        if any(e.kind == "session_start" for e in events):
            await cleanup(conn, retention_days, bank_id=user.bank_id)
    return {
        "recorded": len(inserted),
        "duplicates": len(rows) - len(inserted),
        "ids": [r["id"] for r in inserted],
        "conflicts": [msgspec.structs.asdict(conflict_out(c)) for c, _, _ in found],
    }


async def list_timeline(
    conn: asyncpg.Connection,
    bank_id: int,
    *,
    project: str | None = None,
    since: datetime | None = None,
    limit: int = 200,
) -> list[dict[str, Any]]:
    """This bank's events, newest first (optionally one project, since a time)."""
    rows = await conn.fetch(
        """SELECT e.id, e.kind, e.at, e.project, e.agent, e.member, e.machine, e.branch,
                  e.path, e.tool, e.command, e.exit_code, e.detail, s.session_key AS session,
                  s.cwd
           FROM timeline_events e JOIN timeline_sessions s ON s.id = e.session_id
           WHERE e.bank_id = $1 AND ($2::text IS NULL OR e.project = $2)
             AND ($3::timestamptz IS NULL OR e.at >= $3)
           ORDER BY e.at DESC, e.id DESC
           LIMIT $4""",
        bank_id,
        project,
        since,
        limit,
    )
    events = [{k: v for k, v in dict(r).items() if v is not None} for r in rows]
    await with_handoff_text(conn, bank_id, events)
    return events


async def cleanup(
    conn: asyncpg.Connection, retention_days: int, *, bank_id: int | None = None
) -> dict[str, int]:
    """Remove the timeline older than `retention_days` (one bank, or all): events, sessions
    whose last activity is older, handoffs written before it. Returns the counts removed."""
    cutoff = datetime.now(UTC) - timedelta(days=retention_days)
    counts = {}
    for table, column in (
        ("timeline_events", "at"),
        ("timeline_sessions", "last_at"),
        ("handoffs", "created_at"),
    ):
        status = await conn.execute(
            f"DELETE FROM {table} WHERE {column} < $1 AND ($2::bigint IS NULL OR bank_id = $2)",
            cutoff,
            bank_id,
        )
        counts[table] = int(status.split()[-1])
    return counts


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """`2h`, `30m`, `45s`, `3d`, `1w` ago, or an ISO 8601 time (UTC when no zone is given).
    Raises ValueError naming what is accepted."""
    if not text:
        return None
    text = text.strip()
    now = now or datetime.now(UTC)
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    if len(text) >= 2 and text[-1].lower() in units and text[:-1].isdigit():
        return now - timedelta(seconds=int(text[:-1]) * units[text[-1].lower()])
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"since: {text!r} is neither a duration (30m, 2h, 3d, 1w) nor an ISO time"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)
