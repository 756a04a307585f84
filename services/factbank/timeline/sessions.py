"""Session rows: one upsert per session of a batch (created on its first event), and the last
sessions of other agents or members in a project, with the files each touched."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from factbank.store.banks import Principal
from factbank.timeline.models import NewEvent


def fold_sessions(rows: list[tuple[NewEvent, dict[str, Any], datetime]]) -> dict[str, dict]:
    """One upsert per session of a batch: its details are the last non-empty ones in event
    order, `started` the earliest session_start, `ended` the latest session_end."""
    folded: dict[str, dict] = {}
    for e, f, at in rows:
        s = folded.setdefault(
            f["session_id"],
            {"project": None, "agent": "", "machine": "", "branch": "", "cwd": "",
             "first": at, "last": at, "started": None, "ended": None},
        )
        if f["project"] is not None:
            s["project"] = f["project"]
        for name in ("agent", "machine", "branch", "cwd"):
            if f[name]:
                s[name] = f[name]
        s["first"], s["last"] = min(s["first"], at), max(s["last"], at)
        if e.kind == "session_start":
            s["started"] = at if s["started"] is None else min(s["started"], at)
        if e.kind == "session_end":
            s["ended"] = at if s["ended"] is None else max(s["ended"], at)
    return folded


async def upsert_sessions(
    conn: asyncpg.Connection, user: Principal, folded: dict[str, dict]
) -> dict[str, asyncpg.Record]:
    """The session rows of a batch (created on a session's first event), details filled in:
    session key -> (id, agent, machine, branch). One statement for all of them."""
    keys = list(folded)
    col = [folded[k] for k in keys]
    rows = await conn.fetch(
        """INSERT INTO timeline_sessions
               (bank_id, session_key, project, agent, member_id, member, machine, branch, cwd,
                started_at, ended_at, last_at)
           SELECT $1, x.key, x.project, x.agent, $2, $3, x.machine, x.branch, x.cwd,
                  COALESCE(x.started, x.first), x.ended, x.last
           FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                       $10::timestamptz[], $11::timestamptz[], $12::timestamptz[],
                       $13::timestamptz[])
                AS x(key, project, agent, machine, branch, cwd, first, last, started, ended)
           ON CONFLICT (bank_id, session_key) DO UPDATE SET
               project = COALESCE(EXCLUDED.project, timeline_sessions.project),
               agent = COALESCE(NULLIF(EXCLUDED.agent, ''), timeline_sessions.agent),
               machine = COALESCE(NULLIF(EXCLUDED.machine, ''), timeline_sessions.machine),
               branch = COALESCE(NULLIF(EXCLUDED.branch, ''), timeline_sessions.branch),
               cwd = COALESCE(NULLIF(EXCLUDED.cwd, ''), timeline_sessions.cwd),
               started_at = LEAST(timeline_sessions.started_at,
                                  COALESCE(EXCLUDED.started_at, timeline_sessions.started_at)),
               ended_at = GREATEST(timeline_sessions.ended_at, EXCLUDED.ended_at),
               last_at = GREATEST(timeline_sessions.last_at, EXCLUDED.last_at)
           RETURNING id, session_key, agent, machine, branch""",
        user.bank_id,
        user.member_id,
        user.member_name,
        keys,
        [c["project"] for c in col],
        [c["agent"] for c in col],
        [c["machine"] for c in col],
        [c["branch"] for c in col],
        [c["cwd"] for c in col],
        [c["first"] for c in col],
        [c["last"] for c in col],
        [c["started"] for c in col],
        [c["ended"] for c in col],
    )
    return {r["session_key"]: r for r in rows}


async def handoff_session(conn: asyncpg.Connection, user: Principal, f: dict[str, Any],
                   at: datetime) -> int:
    """The session row of a handoff's author (created if new)."""
    folded = {f["session_id"]: {"project": f["project"], "agent": f["agent"] or "",
                                "machine": "", "branch": "", "cwd": "", "first": at,
                                "last": at, "started": None, "ended": None}}
    return (await upsert_sessions(conn, user, folded))[f["session_id"]]["id"]


async def recent_sessions(
    conn: asyncpg.Connection,
    bank_id: int,
    project: str | None,
    session_key: str,
    *,
    agent: str = "",
    member: str = "",
    limit: int = 3,
    files_each: int = 5,
) -> list[dict[str, Any]]:
    """The last few sessions in the project by another agent or member than this session's
    (any other session when this one is unknown), with the files each touched."""
    if not project:
        return []
    rows = await conn.fetch(
        """SELECT s.id, s.session_key, s.agent, s.member, s.machine, s.branch, s.started_at,
                  s.ended_at, s.last_at,
                  ARRAY(SELECT p FROM (SELECT e.path AS p, max(e.at) AS t
                                       FROM timeline_events e
                                       WHERE e.session_id = s.id AND e.kind = 'file'
                                       GROUP BY e.path ORDER BY t DESC LIMIT $6) x) AS files,
                  (SELECT count(DISTINCT e.path) FROM timeline_events e
                   WHERE e.session_id = s.id AND e.kind = 'file') AS n_files
           FROM timeline_sessions s
           WHERE s.bank_id = $1 AND s.project = $2 AND s.session_key <> $3
             AND NOT (s.agent = $4 AND s.member = $5 AND $4 <> '')
             AND s.session_key NOT LIKE 'handoff-%'
           ORDER BY s.last_at DESC LIMIT $7""",
        bank_id,
        project,
        session_key,
        agent,
        member,
        files_each,
        limit,
    )
    return [dict(r) for r in rows]
