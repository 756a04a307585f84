"""Handoffs: a note for the next session start in the project (any, or one named agent and/or
member), stored redacted, put on the timeline, delivered once and marked delivered."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Any

import asyncpg

from factbank.store.banks import Principal
from factbank.timeline.clean import clean, rel_path
from factbank.timeline.models import NewHandoff
from factbank.timeline.sessions import handoff_session

HANDOFF_DETAIL = re.compile(r"handoff #(\d+)\b")


async def with_handoff_text(
    conn: asyncpg.Connection, bank_id: int, events: list[dict[str, Any]]
) -> None:
    """A handoff event says "handoff #1" (its detail): give it the handoff's text and whether
    it was delivered, so the timeline shows what was handed over, from the one
    stored (redacted) copy."""
    wanted = {}
    for e in events:
        m = HANDOFF_DETAIL.match(e.get("detail") or "") if e["kind"] == "handoff" else None
        if m:
            wanted[id(e)] = int(m.group(1))
    if not wanted:
        return
    rows = await conn.fetch(
        "SELECT id, text, delivered_at FROM handoffs WHERE bank_id = $1 AND id = ANY($2)",
        bank_id,
        list(set(wanted.values())),
    )
    found = {r["id"]: r for r in rows}
    for e in events:
        row = found.get(wanted.get(id(e), 0))
        if row is not None:
            e["text"] = row["text"]
            e["delivered"] = row["delivered_at"] is not None



# The hooks name Claude Code's sessions `claude`; its MCP server calls itself `claude-code`.
# A handoff `--to claude-code` is meant for the same sessions.
AGENT_ALIASES = {"claude-code": "claude"}


async def add_handoff(
    pool: asyncpg.Pool, user: Principal, h: NewHandoff, policy: str
) -> dict[str, Any]:
    """Store a handoff (redacted) and put it on the timeline."""
    to_agent = (h.to_agent or "").strip().lower() or None
    f = await asyncio.to_thread(
        clean,
        {
            "text": h.text,
            "project": h.project,
            "to_agent": AGENT_ALIASES.get(to_agent or "", to_agent),
            "to_member": h.to_member,
            "files": [rel_path(p) or "" for p in h.files],
            "session_id": h.session_id,
            "agent": h.agent or user.agent,
        },
        policy,
    )
    now = datetime.now(UTC)
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            """INSERT INTO handoffs (bank_id, project, text, author_member, author_agent,
                                     author_session, to_agent, to_member, files, fact_ids)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
               RETURNING id, created_at""",
            user.bank_id,
            f["project"],
            f["text"],
            user.member_name,
            f["agent"] or "",
            f["session_id"],
            f["to_agent"] or None,
            f["to_member"] or None,
            f["files"],
            list(h.fact_ids),
        )
        session = f["session_id"] or f"handoff-{row['id']}"
        sid = await handoff_session(
            conn, user, {"session_id": session, "project": f["project"], "agent": f["agent"]}, now
        )
        await conn.execute(
            """INSERT INTO timeline_events (bank_id, session_id, project, kind, at, agent,
                                            member, detail)
               VALUES ($1, $2, $3, 'handoff', $4, $5, $6, $7)""",
            user.bank_id,
            sid,
            f["project"],
            now,
            f["agent"] or "",
            user.member_name,
            f"handoff #{row['id']}" + (f" to {f['to_agent'] or f['to_member']}"
                                       if f["to_agent"] or f["to_member"] else ""),
        )
    return {
        "id": row["id"],
        "project": f["project"],
        "text": f["text"],
        "to_agent": f["to_agent"] or None,
        "to_member": f["to_member"] or None,
        "files": f["files"],
        "fact_ids": list(h.fact_ids),
        "created_at": row["created_at"],
        "delivered_at": None,
    }


async def take_handoffs(
    conn: asyncpg.Connection,
    bank_id: int,
    project: str | None,
    session_key: str,
    *,
    agent: str = "",
    member: str = "",
    limit: int = 3,
) -> list[dict[str, Any]]:
    """Deliver the open handoffs of `project` meant for this session (any, or its agent or
    member): each is returned once, marked delivered to `session_key`."""
    if not project:
        return []
    rows = await conn.fetch(
        """UPDATE handoffs SET delivered_at = now(), delivered_to_session = $3
           WHERE id IN (
               SELECT id FROM handoffs
               WHERE bank_id = $1 AND project = $2 AND delivered_at IS NULL
                 AND (author_session IS NULL OR author_session <> $3)
                 AND (to_agent IS NULL OR to_agent = $4)
                 AND (to_member IS NULL OR to_member = $5)
               ORDER BY created_at
               LIMIT $6
               FOR UPDATE SKIP LOCKED)
           RETURNING id, text, author_member, author_agent, to_agent, to_member, files,
                     fact_ids, created_at""",
        bank_id,
        project,
        session_key,
        agent,
        member,
        limit,
    )
    return sorted((dict(r) for r in rows), key=lambda r: r["created_at"])


async def list_handoffs(
    conn: asyncpg.Connection, bank_id: int, project: str | None, *, open_only: bool = False
) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        """SELECT id, project, text, author_member, author_agent, to_agent, to_member, files,
                  fact_ids, created_at, delivered_at, delivered_to_session
           FROM handoffs
           WHERE bank_id = $1 AND ($2::text IS NULL OR project = $2)
             AND (NOT $3 OR delivered_at IS NULL)
           ORDER BY created_at DESC LIMIT 200""",
        bank_id,
        project,
        open_only,
    )
    return [dict(r) for r in rows]
