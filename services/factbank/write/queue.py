"""The review queue: candidate facts that wait for a person or an agent (migration 0013).

Two kinds arrive, nothing else:

* **successor**: `verify` found a fact stale because the line it quotes changed, and the
  client could tell which line replaced it (the changed hunk at the same place). The candidate
  is the same fact with the new line as its quote, at its new location and fingerprint, and
  the commit that changed it. Proposed inside verify's own transaction (`propose_successor`).
* **correction**: an agent chose to queue a fact instead of saving it (`queue_fact`),
  optionally naming the fact it would supersede.

Nothing enters the bank until someone accepts: `accept` is a normal supersede through the
one write path (the gate, redaction, embedding, `ceremony`) with the reason "source changed
in <commit>" for a successor, the candidate's own reason for a correction; without a fact to
replace it is a plain add. The candidate is marked accepted inside that same transaction, so
two accepts of one candidate store one fact. `accept` may carry edits (content, tags,
questions, category): "edit then accept". `reject` keeps the candidate, and with it its
source key (the quote, whitespace normalised): the same text is never proposed again for the
same fact (the unique index `candidates_once`).

Every string a candidate holds was redacted before it was stored: a successor's quote,
location and commit with verify's other texts (`staleness/verify.py`), a queued fact by the
write gate. Scopes: listing needs `read`; queueing, accepting and rejecting need `write`
(the routes' guards), as saving and superseding do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import datetime
from typing import Any, Literal

import asyncpg
import msgspec

from factbank.errors import Conflict, NotFound, Refused
from factbank.models import NewFact, Successor
from factbank.redact import redaction
from factbank.store import ceremony
from factbank.store.banks import Principal
from factbank.write import retain
from factbank.write.deps import Deps
from factbank.write.retain import Outcome
from factbank.write.retain.gating import gated

STATUSES = ("pending", "accepted", "rejected", "withdrawn")
MAX_REASON_CHARS = 500


class Candidate(msgspec.Struct, kw_only=True):
    id: int
    kind: str
    status: str
    fact: dict[str, Any]  # the candidate as a `POST /v1/facts` body
    reason: str
    replaces: int | None = None
    # The replaced fact as it stands: content, quote, location, status (for the review).
    was: dict[str, Any] | None = None
    commit: str | None = None
    agent: str = ""
    member: str | None = None
    created_at: datetime
    decided_at: datetime | None = None
    decision: str | None = None
    result_fact: int | None = None


def source_key(quote: str) -> str:
    """The candidate's source text, as the "not proposed again" rule compares it."""
    return hashlib.sha256(" ".join(quote.split()).encode()).hexdigest()


def successor_reason(commit: str | None) -> str:
    return f"source changed in {commit[:12]}" if commit else "source changed (not committed)"


_SELECT = """
SELECT c.*, m.name AS member, f.content AS was_content, f.quote AS was_quote,
       f.source_location AS was_location, f.status AS was_status
FROM candidates c
LEFT JOIN members m ON m.id = c.member_id
LEFT JOIN facts f ON f.id = c.replaces
"""


def _candidate(row: asyncpg.Record) -> Candidate:
    was = None
    if row["replaces"] is not None:
        was = {"content": row["was_content"], "quote": row["was_quote"],
               "location": row["was_location"], "status": row["was_status"]}
    return Candidate(
        id=row["id"], kind=row["kind"], status=row["status"], fact=json.loads(row["fact"]),
        reason=row["reason"], replaces=row["replaces"], was=was, commit=row["source_commit"],
        agent=row["agent"], member=row["member"], created_at=row["created_at"],
        decided_at=row["decided_at"], decision=row["decision"], result_fact=row["result_fact"],
    )


async def get(conn: asyncpg.Connection, bank_id: int, cand_id: int) -> Candidate:
    row = await conn.fetchrow(_SELECT + " WHERE c.bank_id = $1 AND c.id = $2", bank_id, cand_id)
    if row is None:
        raise NotFound(f"no candidate #{cand_id} in this bank")
    return _candidate(row)


async def list_candidates(
    conn: asyncpg.Connection,
    bank_id: int,
    *,
    status: str | None = "pending",
    fact_id: int | None = None,
    after: int = 0,
    limit: int = 50,
) -> list[Candidate]:
    """Candidates in id order (oldest first), `status` None for every status."""
    rows = await conn.fetch(
        _SELECT + """ WHERE c.bank_id = $1 AND ($2::text IS NULL OR c.status = $2)
                        AND ($3::bigint IS NULL OR c.replaces = $3) AND c.id > $4
                      ORDER BY c.id LIMIT $5""",
        bank_id, status, fact_id, after, limit,
    )
    return [_candidate(r) for r in rows]


async def _insert(
    w: ceremony.Write,
    kind: str,
    fact: dict[str, Any],
    reason: str,
    replaces: int | None,
    commit: str | None,
    agent: str,
) -> int | None:
    """Queue one candidate (`agent`: the caller's, already redacted) unless this fact already
    has it pending or rejected it (None).
    A pending successor of the same fact with other text is withdrawn: the newer wins
    (corrections stand side by side: two agents may disagree)."""
    key = source_key(str(fact["quote"]))
    if replaces is not None:
        refused = await w.conn.fetchval(
            "SELECT id FROM candidates WHERE bank_id = $1 AND replaces = $2 AND source_key = $3 "
            "AND status IN ('pending', 'rejected')",
            w.bank_id, replaces, key,
        )
        if refused is not None:
            return None
        if kind == "successor":  # the source moved on again: only the newest text stands
            await w.conn.execute(
                "UPDATE candidates SET status = 'withdrawn', decided_at = now(), "
                "decision = 'a newer proposal replaced it' WHERE bank_id = $1 AND "
                "replaces = $2 AND status = 'pending' AND kind = 'successor'",
                w.bank_id, replaces,
            )
    cand_id = await w.conn.fetchval(
        """INSERT INTO candidates (bank_id, kind, replaces, fact, reason, source_commit,
                                   source_key, member_id, agent)
           VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9)
           ON CONFLICT (bank_id, coalesce(replaces, 0), source_key)
               WHERE status IN ('pending', 'rejected') DO NOTHING
           RETURNING id""",
        w.bank_id, kind, replaces, json.dumps(fact, ensure_ascii=False), reason, commit, key,
        w.principal.member_id, agent,
    )
    if cand_id is not None:
        await w.audit("candidate.queue", str(cand_id),
                      {"kind": kind, "replaces": replaces, "commit": commit})
    return cand_id


def _fact_body(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "content": row["content"], "category": row["category"],
        "source": {"kind": row["source_kind"], "location": row["source_location"]},
        "quote": row["quote"], "origin": row["origin"], "tentative": row["tentative"],
        "tags": list(row["tags"]), "questions": list(row["questions"]),
        "project": row["project"],
    }


async def propose_successor(w: ceremony.Write, fact_id: int, hint: Successor) -> int | None:
    """The same fact with the new line as its quote, queued in verify's transaction (`hint`
    already redacted there). None when it was proposed before (pending, or rejected)."""
    row = await w.conn.fetchrow("SELECT * FROM facts WHERE bank_id = $1 AND id = $2",
                                w.bank_id, fact_id)
    if row is None or row["status"] in ("superseded", "deleted"):
        return None
    if source_key(hint.quote) == source_key(row["quote"]):
        return None  # the quote did not change: nothing to succeed it with
    body = _fact_body(row)
    body["quote"] = hint.quote
    body["source"] = {"kind": row["source_kind"], "location": hint.location}
    if hint.fingerprint is not None:
        body["fingerprint"] = msgspec.to_builtins(hint.fingerprint)
    # the X-Factbank-Agent header is the caller's text: redacted before it is stored
    agent = await asyncio.to_thread(redaction.clean_text, "X-Factbank-Agent",
                                    w.principal.agent or "", w.principal.redaction_policy)
    return await _insert(w, "successor", body, successor_reason(hint.commit), fact_id,
                         hint.commit, agent)


async def queue_fact(
    deps: Deps, principal: Principal, item: NewFact, replaces: int | None, reason: str
) -> Candidate:
    """An agent's correction, queued instead of saved: through the write gate (refused as a
    save would be; redacted), stored as the candidate. Nothing enters the bank."""
    async with deps.pool.acquire() as conn:
        prepared, errors = await gated(conn, deps, principal, [item])
    policy = principal.redaction_policy  # read with the token, never again
    if errors:
        raise Refused(errors[0]["reasons"])
    p = prepared[0]
    assert p is not None
    why = " ".join(reason.split())[:MAX_REASON_CHARS]
    why = await asyncio.to_thread(redaction.clean_text, "reason", why, policy) if why else ""
    body = {
        "content": p.content, "category": p.category,
        "source": {"kind": p.source_kind, "location": p.source_location}, "quote": p.quote,
        "origin": p.origin, "tentative": p.tentative, "tags": p.tags, "questions": p.questions,
        "project": p.project,
    }
    if p.fingerprint is not None:
        body["fingerprint"] = msgspec.to_builtins(p.fingerprint)
    async with ceremony.write(deps.pool, principal) as w:
        if replaces is not None:
            status = await w.conn.fetchval(
                "SELECT status FROM facts WHERE bank_id = $1 AND id = $2", w.bank_id, replaces)
            if status is None:
                raise NotFound(f"no fact #{replaces} in this bank")
            if status == "superseded":
                raise Refused.one("replaces", f"fact #{replaces} is already superseded")
        cand_id = await _insert(w, "correction", body, why or "queued correction", replaces,
                                None, p.agent)  # the gate's redacted agent
        if cand_id is None:
            raise Conflict(f"this text is already queued or was rejected for fact #{replaces}")
        return await get(w.conn, w.bank_id, cand_id)


class Edits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What a reviewer changes before accepting (None: as proposed)."""

    content: str | None = None
    category: str | None = None
    tags: list[str] | None = None
    questions: list[str] | None = None


def _item(cand: Candidate, edits: Edits | None) -> NewFact:
    body = dict(cand.fact)
    for key in ("content", "category", "tags", "questions"):
        value = getattr(edits, key) if edits is not None else None
        if value is not None:
            body[key] = value
    try:
        return msgspec.convert(body, NewFact)
    except msgspec.ValidationError as exc:
        raise Refused.one("fact", f"the candidate is not a valid fact: {exc}") from None


async def _pending(deps: Deps, principal: Principal, cand_id: int) -> Candidate:
    async with deps.pool.acquire() as conn:
        cand = await get(conn, principal.bank_id, cand_id)
    if cand.status != "pending":
        raise Conflict(f"candidate #{cand_id} is {cand.status}, not pending")
    return cand


async def _decide(
    w: ceremony.Write, cand_id: int, status: Literal["accepted", "rejected"],
    decision: str | None, result: int | None,
) -> None:
    done = await w.conn.fetchval(
        """UPDATE candidates SET status = $3, decided_at = now(), decided_by = $4,
                  decision = $5, result_fact = $6
           WHERE bank_id = $1 AND id = $2 AND status = 'pending' RETURNING id""",
        w.bank_id, cand_id, status, w.principal.member_id, decision, result,
    )
    if done is None:  # decided meanwhile by someone else: this transaction rolls back
        raise Conflict(f"candidate #{cand_id} was decided meanwhile")


async def accept(
    deps: Deps, principal: Principal, cand_id: int, edits: Edits | None = None
) -> tuple[Candidate, Outcome]:
    """Store the candidate through the one write path, in ONE transaction with its decision:
    a supersede of `replaces` (reason: the candidate's) or, without one, an add."""
    cand = await _pending(deps, principal, cand_id)
    item = _item(cand, edits)
    edited = sorted(k for k in ("content", "category", "tags", "questions")
                    if edits is not None and getattr(edits, k) is not None)

    async def mark(w: ceremony.Write, fact_id: int) -> None:
        await _decide(w, cand_id, "accepted", "edited: " + ", ".join(edited) if edited else None,
                      fact_id)
        await w.audit("candidate.accept", str(cand_id), {"fact": fact_id, "edited": edited})

    if cand.replaces is not None:
        outcome = await retain.supersede(deps, principal, item, [cand.replaces], cand.reason,
                                         then=mark)
    else:
        outcome = (await retain.add_many(deps, principal, [item], then=mark))[0]
    async with deps.pool.acquire() as conn:
        return await get(conn, principal.bank_id, cand_id), outcome


async def reject(deps: Deps, principal: Principal, cand_id: int, reason: str = "") -> Candidate:
    """Keep the candidate as rejected: its text is never proposed again for the same fact."""
    await _pending(deps, principal, cand_id)
    policy = principal.redaction_policy  # read with the token, never again
    why = " ".join(reason.split())[:MAX_REASON_CHARS]
    why = await asyncio.to_thread(redaction.clean_text, "reason", why, policy) if why else ""
    async with ceremony.write(deps.pool, principal) as w:
        await _decide(w, cand_id, "rejected", why or None, None)
        await w.audit("candidate.reject", str(cand_id), {})
        return await get(w.conn, w.bank_id, cand_id)
