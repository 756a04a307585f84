"""The timeline of a project: what just happened, on any machine, in any harness.

Sessions, file touches, commands, session start/end, handoffs and conflicts, per bank and
project key. Every text is redacted (`redaction.clean_fields`, i.e. `redact_fields` under the
bank's policy) before it is stored. Nothing here ever becomes a fact: these rows are not
embedded, indexed, recalled or injected as facts (docs/principles.md#write-gate).

Conflicts: a file event whose path another session touched in the same project within the
window (default 30 minutes, `Settings.conflict_window_minutes`) is a conflict. "Another
session" is any other session key: another agent, member or machine, or a second window of the
same agent. The warning names the file, who, which agent, how long ago and the branch, and
says when the branches differ. Each conflict is recorded on the timeline (kind `conflict`).

Handoffs: a note for the next session start in the project (any, or one named agent and/or
member); it is delivered once and marked delivered.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

import asyncpg
import msgspec

from factbank.models import Strict
from factbank.redact import redaction
from factbank.store.banks import Principal

DEFAULT_WINDOW_MINUTES = 30
DEFAULT_RETENTION_DAYS = 30
MAX_BATCH = 500
# How far in the future a client clock may be before its `at` is taken as now.
CLOCK_SKEW = timedelta(minutes=2)

EventKind = Literal["session_start", "session_end", "file", "command", "handoff"]
Short = Annotated[str, msgspec.Meta(max_length=200)]
PathText = Annotated[str, msgspec.Meta(max_length=1000)]
CommandText = Annotated[str, msgspec.Meta(max_length=4000)]


class NewEvent(Strict):
    """One thing that happened in a session. `session_id` is the harness's own session id;
    `path` and `cwd` are relative to the repository root; `at` defaults to now (a buffered
    event sent later carries the time it happened). `key` names the event within its session
    (e.g. the tool call's id and the event's index in it): an event whose key the session
    already holds is not stored again (migration 0006), so a hook and a history import, or
    two imports, never store the same event twice."""

    session_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    kind: EventKind
    project: Annotated[str, msgspec.Meta(max_length=300)] | None = None
    agent: Short | None = None
    machine: Short | None = None
    branch: Short | None = None
    cwd: PathText | None = None
    path: PathText | None = None
    tool: Short | None = None
    command: CommandText | None = None
    exit_code: Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)] | None = None
    at: datetime | None = None
    key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


class EventBatch(Strict):
    events: Annotated[list[NewEvent], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]


class NewHandoff(Strict):
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    project: Annotated[str, msgspec.Meta(max_length=300)] | None = None
    to_agent: Short | None = None
    to_member: Short | None = None
    files: Annotated[list[PathText], msgspec.Meta(max_length=50)] = msgspec.field(
        default_factory=list
    )
    fact_ids: Annotated[list[int], msgspec.Meta(max_length=50)] = msgspec.field(
        default_factory=list
    )
    session_id: Short | None = None
    agent: Short | None = None


@dataclass(frozen=True)
class Conflict:
    path: str
    member: str
    agent: str
    machine: str
    branch: str
    other_branch: bool  # the other session is on a different branch than this one
    seconds_ago: int
    session: str
    for_session: str = ""  # the session whose event ran into it (its harness session id)
    other_id: int | None = None  # the session row of `session`: told in its next prompt

    def warning(self) -> str:
        return conflict_warning(self)


@functools.cache
def configured_window() -> int:
    """The conflict window of this process's settings (for callers without a Settings)."""
    from factbank.settings import Settings

    try:
        return Settings.from_env().conflict_window_minutes
    except ValueError:
        return DEFAULT_WINDOW_MINUTES


def ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


def conflict_warning(c: Conflict) -> str:
    who = c.member or "someone"
    where = f" on {c.machine}" if c.machine else ""
    branch = c.branch or "?"
    mark = f" (a DIFFERENT branch: {branch})" if c.other_branch else f" (branch {branch})"
    return (
        f"{c.path} was also touched by {who} with {c.agent or 'an agent'}{where} "
        f"{ago(c.seconds_ago)}{mark}"
    )


def clean(fields: dict[str, Any], policy: str) -> dict[str, Any]:
    """Every text field redacted together (a secret in one is removed from the others), or
    refused under the bank's `reject` policy (`errors.Refused` naming the field)."""
    present = {k: v for k, v in fields.items() if isinstance(v, (str, list)) and v}
    if not present:
        return fields
    clean = redaction.clean_fields(present, policy)
    return {**fields, **clean}


def clean_event(e: NewEvent, agent: str, policy: str) -> dict[str, Any]:
    return clean(
        {
            "session_id": e.session_id,
            "project": e.project,
            "agent": e.agent or agent,
            "machine": e.machine or "",
            "branch": e.branch or "",
            "cwd": (e.cwd or "").strip(),
            "path": rel_path(e.path),
            "tool": e.tool,
            "command": e.command,
        },
        policy,
    )


def rel_path(path: str | None) -> str | None:
    if path is None:
        return None
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


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


class ConflictOut(msgspec.Struct, kw_only=True):
    session_id: str  # the session whose event ran into it
    path: str
    member: str
    agent: str
    machine: str
    branch: str
    other_branch: bool
    seconds_ago: int
    warning: str


def conflict_out(c: Conflict) -> ConflictOut:
    return ConflictOut(
        session_id=c.for_session,
        path=c.path,
        member=c.member,
        agent=c.agent,
        machine=c.machine,
        branch=c.branch,
        other_branch=c.other_branch,
        seconds_ago=c.seconds_ago,
        warning=c.warning(),
    )


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
