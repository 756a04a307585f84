"""Conflicts: a file event whose path another session touched in the same project within the
window (default 30 minutes, `Settings.conflict_window_minutes`). Found for a batch as it is
stored, listed live, and told once to the session whose file another edit ran into."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from factbank.timeline.models import DEFAULT_WINDOW_MINUTES
from factbank.timeline.wording import Conflict, conflict_warning


@functools.cache
def configured_window() -> int:
    """The conflict window of this process's settings (for callers without a Settings)."""
    from factbank.settings import Settings

    try:
        return Settings.from_env().conflict_window_minutes
    except ValueError:
        return DEFAULT_WINDOW_MINUTES



async def conflicts_for(
    conn: asyncpg.Connection,
    bank_id: int,
    project: str | None,
    path: str,
    session_key: str,
    branch: str,
    at: datetime | None = None,
    window_minutes: int = DEFAULT_WINDOW_MINUTES,
) -> list[Conflict]:
    """Other sessions that touched `path` in `project` within the window around `at` (default
    now; the latest touch of each), newest first."""
    if not project or not path:
        return []
    at = at or datetime.now(UTC)
    window = timedelta(minutes=window_minutes)
    rows = await conn.fetch(
        """SELECT DISTINCT ON (s.session_key) s.session_key, e.member, e.agent, e.machine,
                  e.branch, e.at
           FROM timeline_events e JOIN timeline_sessions s ON s.id = e.session_id
           WHERE e.bank_id = $1 AND e.project = $2 AND e.kind = 'file' AND e.path = $3
             AND s.session_key <> $4 AND e.at BETWEEN $5 AND $6
           ORDER BY s.session_key, e.at DESC""",
        bank_id,
        project,
        path,
        session_key,
        at - window,
        at + window,
    )
    out = [
        Conflict(
            path=path,
            member=r["member"],
            agent=r["agent"],
            machine=r["machine"],
            branch=r["branch"],
            other_branch=bool(branch and r["branch"] and branch != r["branch"]),
            seconds_ago=int(abs((at - r["at"]).total_seconds())),
            session=r["session_key"],
        )
        for r in rows
    ]
    out.sort(key=lambda c: c.seconds_ago)
    return out



async def batch_conflicts(
    conn: asyncpg.Connection,
    bank_id: int,
    files: list[asyncpg.Record],
    session_keys: dict[int, str],
    window_minutes: int,
) -> list[tuple[Conflict, str, datetime]]:
    """For each new file event, the other sessions that touched the path in the project
    within the window before it was stored (the latest touch of each), nearest first; with
    the event's project and time (where the conflict is recorded)."""
    hits = await conn.fetch(
        """SELECT DISTINCT ON (x.id, s.session_key) x.id, s.session_key, s.id AS other_id,
                  e.member, e.agent, e.machine, e.branch, e.at
           FROM unnest($2::bigint[], $3::text[], $4::text[], $5::timestamptz[], $6::text[])
                AS x(id, project, path, at, skey)
           JOIN timeline_events e
             ON e.bank_id = $1 AND e.project = x.project AND e.kind = 'file'
            AND e.path = x.path AND e.id < x.id
            AND e.at BETWEEN x.at - make_interval(mins => $7) AND x.at + make_interval(mins => $7)
           JOIN timeline_sessions s ON s.id = e.session_id AND s.session_key <> x.skey
           ORDER BY x.id, s.session_key, e.at DESC""",
        bank_id,
        [r["id"] for r in files],
        [r["project"] for r in files],
        [r["path"] for r in files],
        [r["at"] for r in files],
        [session_keys[r["session_id"]] for r in files],
        window_minutes,
    )
    by_event: dict[int, list[asyncpg.Record]] = {}
    for h in hits:
        by_event.setdefault(h["id"], []).append(h)
    out: list[tuple[Conflict, str, datetime]] = []
    for r in files:
        mine = [
            Conflict(
                path=r["path"],
                member=h["member"],
                agent=h["agent"],
                machine=h["machine"],
                branch=h["branch"],
                other_branch=bool(r["branch"] and h["branch"] and r["branch"] != h["branch"]),
                seconds_ago=int(abs((r["at"] - h["at"]).total_seconds())),
                session=h["session_key"],
                for_session=session_keys[r["session_id"]],
                other_id=h["other_id"],
            )
            for h in by_event.get(r["id"], [])
        ]
        mine.sort(key=lambda c: c.seconds_ago)
        out.extend((c, r["project"], r["at"]) for c in mine)
    return out



async def live_conflicts(
    conn: asyncpg.Connection,
    bank_id: int,
    project: str | None,
    *,
    session_key: str | None = None,
    window_minutes: int = DEFAULT_WINDOW_MINUTES,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """Conflicts recorded in the project within the window, newest first; with `session_key`
    only those that involve that session (recorded by it, or naming a file it touched)."""
    if not project:
        return []
    rows = await conn.fetch(
        """SELECT e.at, e.path, e.detail, e.agent, e.member, e.branch, s.session_key AS session
           FROM timeline_events e JOIN timeline_sessions s ON s.id = e.session_id
           WHERE e.bank_id = $1 AND e.project = $2 AND e.kind = 'conflict'
             AND e.at >= now() - make_interval(mins => $3)
             AND ($4::text IS NULL OR s.session_key = $4 OR EXISTS (
                 SELECT 1 FROM timeline_events o JOIN timeline_sessions os
                        ON os.id = o.session_id
                 WHERE o.bank_id = $1 AND o.project = $2 AND o.kind = 'file'
                   AND o.path = e.path AND os.session_key = $4))
           ORDER BY e.at DESC LIMIT $5""",
        bank_id,
        project,
        window_minutes,
        session_key,
        limit,
    )
    return [dict(r) for r in rows]


async def tell_conflicts(
    conn: asyncpg.Connection,
    bank_id: int,
    session_key: str,
    *,
    window_minutes: int = DEFAULT_WINDOW_MINUTES,
    limit: int = 3,
) -> list[str]:
    """The conflicts another session's edit ran into with a file this session touched, not
    yet told to this session and within the window: each is returned once (marked told), as
    a warning naming that other session's file, member, agent, machine and branch."""
    rows = await conn.fetch(
        """UPDATE timeline_events e SET told_at = now()
           FROM timeline_sessions me
           WHERE e.id IN (
               SELECT c.id FROM timeline_events c JOIN timeline_sessions m
                      ON m.id = c.other_session
               WHERE m.bank_id = $1 AND m.session_key = $2 AND c.bank_id = $1
                 AND c.kind = 'conflict' AND c.told_at IS NULL
                 AND c.at >= now() - make_interval(mins => $3)
               ORDER BY c.at DESC LIMIT $4
               FOR UPDATE SKIP LOCKED)
             AND me.id = e.other_session
           RETURNING e.path, e.member, e.agent, e.machine, e.branch, e.at,
                     me.branch AS my_branch""",
        bank_id,
        session_key,
        window_minutes,
        limit,
    )
    now = datetime.now(UTC)
    return [
        conflict_warning(Conflict(
            path=r["path"], member=r["member"], agent=r["agent"], machine=r["machine"],
            branch=r["branch"],
            other_branch=bool(r["branch"] and r["my_branch"] and r["branch"] != r["my_branch"]),
            seconds_ago=int((now - r["at"]).total_seconds()), session="",
        ))
        for r in sorted(rows, key=lambda r: r["at"], reverse=True)
    ]
