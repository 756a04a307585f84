"""The miss report: repeats per week, project and kind, split by what the writing session had
been shown (factbank.write.misses records them), the corrections the prompt hook recognised,
and the before/after comparison around a date (the design's real-use measure: the same
correction given twice, over weeks before and after a change).

Classes of a repeat (docs/misses.md):
* recall miss: the held fact was never shown to the writing session;
* presentation miss: it was injected into the session, or found by a search in it;
* no session: the write named no session (a CLI outside a harness): not classed;
* repeated correction: the held fact was itself a correction and the user corrected again.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

KINDS = ("same", "correction", "equivalent", "retired")


def _empty() -> dict[str, Any]:
    return {"repeats": 0, **{k: 0 for k in KINDS}, "recall_miss": 0, "presentation_miss": 0,
            "no_session": 0, "repeated_correction": 0}


def _count(into: dict[str, Any], r: Any) -> None:
    into["repeats"] += r["n"]
    into[r["kind"]] += r["n"]
    cls = {"never": "recall_miss", "injected": "presentation_miss",
           "searched": "presentation_miss"}.get(r["shown"], "no_session")
    into[cls] += r["n"]
    into["repeated_correction"] += r["rc"]


async def _corrections(
    conn: asyncpg.Connection, bank_id: int, start: datetime, end: datetime
) -> dict[str, int]:
    row = await conn.fetchrow(
        """SELECT
             (SELECT count(*) FROM correction_nudges
              WHERE bank_id = $1 AND at >= $2 AND at < $3) AS recognised,
             (SELECT count(*) FROM session_writes
              WHERE bank_id = $1 AND nudged AND at >= $2 AND at < $3) AS saved_after_nudge,
             (SELECT count(*) FROM repeats
              WHERE bank_id = $1 AND nudged_fact AND at >= $2 AND at < $3) AS repeats_of_nudged""",
        bank_id, start, end,
    )
    return dict(row)


async def _totals(
    conn: asyncpg.Connection, bank_id: int, start: datetime, end: datetime
) -> dict[str, Any]:
    out = _empty()
    for r in await conn.fetch(
        """SELECT kind, shown, count(*) AS n, count(*) FILTER (WHERE repeated_correction) AS rc
           FROM repeats WHERE bank_id = $1 AND at >= $2 AND at < $3 GROUP BY kind, shown""",
        bank_id, start, end,
    ):
        _count(out, r)
    return out | await _corrections(conn, bank_id, start, end)


def _midnight(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


async def report(
    conn: asyncpg.Connection,
    bank_id: int,
    *,
    weeks: int = 4,
    since: date | None = None,
    around: date | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Repeats per ISO week (Monday) and project from `since` (default: `weeks` weeks back)
    to now, with the facts involved, the totals, and with `around` the `weeks` weeks before
    that date against the `weeks` weeks from it."""
    now = now or datetime.now(UTC)
    start = _midnight(since) if since else now - timedelta(weeks=weeks)
    rows = await conn.fetch(
        """SELECT date_trunc('week', r.at AT TIME ZONE 'UTC')::date AS week,
                  coalesce(r.project, '') AS project, r.kind, r.shown, r.fact_id,
                  r.new_fact_id, r.repeated_correction, r.session_key, r.agent,
                  left(f.content, 120) AS content
           FROM repeats r JOIN facts f ON f.id = r.fact_id
           WHERE r.bank_id = $1 AND r.at >= $2 AND r.at < $3
           ORDER BY week, project, r.id""",
        bank_id, start, now,
    )
    groups: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {**_empty(), "facts": []}
    )
    for r in rows:
        g = groups[(r["week"].isoformat(), r["project"])]
        _count(g, {"kind": r["kind"], "shown": r["shown"], "n": 1,
                   "rc": int(r["repeated_correction"])})
        g["facts"].append({"id": r["fact_id"], "new": r["new_fact_id"], "kind": r["kind"],
                           "shown": r["shown"], "repeated_correction": r["repeated_correction"],
                           "content": r["content"], "agent": r["agent"]})
    out: dict[str, Any] = {
        "since": start.isoformat(),
        "until": now.isoformat(),
        "weeks": [{"week": w, "project": p or None, **g} for (w, p), g in sorted(groups.items())],
        "totals": await _totals(conn, bank_id, start, now),
    }
    if around is not None:
        pivot = _midnight(around)
        span = timedelta(weeks=weeks)
        out["around"] = {
            "date": around.isoformat(),
            "weeks": weeks,
            "before": await _totals(conn, bank_id, pivot - span, pivot),
            "after": await _totals(conn, bank_id, pivot, pivot + span),
        }
    return out
