"""Verify: what a client found of its facts' sources, applied in one transaction.

The server never reads agents' files. `factbank verify` checks each file or commit fact of a
project against the working tree and git, and posts one verdict per fact:

* fresh: the quote is still where the fact says. `verified_at` is set; no event (a verify
  runs at every session start and commit, and "still true" is not history);
* moved: the quote is elsewhere (another line, or the file git renamed it to). The location
  and fingerprint are updated and the history says from where to where (event `relocated`);
* stale: the quote is gone or changed, the file was deleted, the commit is unreachable. The
  fact's status becomes `stale`, with the reason and the new text around the old line (both
  redacted and bounded), event `staled`, and every fact that cites it is flagged for review
  (`derived.flag_dependents`). A fact already stale stays stale; its reason is updated only
  when it changed. When the client could tell which line replaced the quoted one, the
  successor it sends is queued for review (write/queue.py), never stored.

A stale fact keeps its trust: staleness says the source moved on, not that the claim was
judged wrong (trust.py), and it "counts against nothing else". It stays searchable, marked,
and is never injected; a confirm with a fresh quote makes it active again, a supersede
replaces it. A fresh or moved verdict on a stale fact changes nothing (only a confirm, made
by someone who looked, revives it): it is answered as skipped, as are retired facts.

Every text is cleaned under the bank's policy before the transaction (reject: a 422 naming
`results[i].reason` and so on); an id not in this bank, an id listed twice, a verdict
without what it needs refuse the whole batch, naming the item. Nothing is half-applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from factbank.errors import BatchRefused, Refused, reason
from factbank.models import Fingerprint, Skipped, Successor, VerifyAnswer, VerifyResult
from factbank.observability import STALENESS
from factbank.redact import redaction
from factbank.store import ceremony, facts
from factbank.store.banks import Principal
from factbank.write import derived, gate, queue
from factbank.write.deps import Deps

MAX_REASON_CHARS = 500
MAX_CONTEXT_CHARS = 2000


@dataclass
class Clean:
    """One verdict with its texts cleaned and bounded."""

    id: int
    verdict: str
    location: str | None
    fingerprint: Fingerprint | None
    reason: str
    context: str
    successor: Successor | None = None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _clean(results: Sequence[VerifyResult], policy: str) -> tuple[list[Clean], list[dict]]:
    """Each verdict redacted under the bank's policy and checked for what it needs."""
    out: list[Clean] = []
    errors: list[dict] = []
    seen: set[int] = set()
    for i, r in enumerate(results):
        at = f"results[{i}]"
        why: list[dict[str, str]] = []
        if r.id in seen:
            why.append(reason(f"{at}.id", f"fact #{r.id} is listed twice"))
        seen.add(r.id)
        location = (r.location or "").strip() or None
        text = " ".join((r.reason or "").split())
        if r.verdict == "moved" and location is None:
            why.append(reason(f"{at}.location", "a moved fact needs its new location"))
        if location is not None and len(location) > gate.MAX_LOCATION_CHARS:
            why.append(
                reason(
                    f"{at}.location",
                    f"location is longer than {gate.MAX_LOCATION_CHARS} characters",
                )
            )
        if r.fingerprint is not None and location is not None:
            why.extend(
                gate.symbol_fingerprint_reasons(
                    "file", location, r.fingerprint, f"{at}.fingerprint"
                )
            )
        if r.verdict == "stale" and not text:
            why.append(reason(f"{at}.reason", "say why the fact is stale"))
        if why:
            errors.append({"index": i, "reasons": why})
            continue
        fields = {
            f"{at}.location": location,
            f"{at}.reason": text,
            f"{at}.context": (r.context or "").rstrip(),
            f"{at}.fingerprint.path": r.fingerprint.path if r.fingerprint else None,
            f"{at}.fingerprint.symbol": r.fingerprint.symbol or None if r.fingerprint else None,
        }
        nxt = r.successor if r.verdict == "stale" else None
        if nxt is not None:
            fields[f"{at}.successor.quote"] = nxt.quote
            fields[f"{at}.successor.location"] = nxt.location
            fields[f"{at}.successor.fingerprint.path"] = (
                nxt.fingerprint.path if nxt.fingerprint else None)
        try:
            clean = redaction.clean_fields(fields, policy)
        except Refused as exc:
            errors.append({"index": i, "reasons": exc.reasons})
            continue
        fp = r.fingerprint
        if fp is not None:
            fp = msgspec.structs.replace(
                fp,
                path=str(clean[f"{at}.fingerprint.path"]),
                symbol=clean[f"{at}.fingerprint.symbol"] or msgspec.UNSET,
            )
        if nxt is not None:
            nfp = nxt.fingerprint
            if nfp is not None:
                nfp = msgspec.structs.replace(
                    nfp, path=str(clean[f"{at}.successor.fingerprint.path"]))
            nxt = msgspec.structs.replace(
                nxt, quote=str(clean[f"{at}.successor.quote"]),
                location=str(clean[f"{at}.successor.location"]), fingerprint=nfp)
        out.append(
            Clean(
                id=r.id,
                verdict=r.verdict,
                location=clean[f"{at}.location"],  # type: ignore[arg-type]
                fingerprint=fp,
                reason=_clip(str(clean[f"{at}.reason"]), MAX_REASON_CHARS),
                context=_clip(str(clean[f"{at}.context"]), MAX_CONTEXT_CHARS),
                successor=nxt,
            )
        )
    return out, errors


async def verify(
    deps: Deps,
    principal: Principal,
    results: Sequence[VerifyResult],
    project: str | None,
    policy: str,
) -> VerifyAnswer:
    """Apply a batch of verdicts in ONE transaction (see the module docstring)."""
    cleaned, errors = await asyncio.to_thread(_clean, results, policy)
    if errors:
        raise BatchRefused(errors)
    answer = VerifyAnswer()
    if not cleaned:
        return answer
    async with ceremony.write(deps.pool, principal) as w:
        conn = w.conn
        # Every named fact's row, locked in id order (two verifies never deadlock).
        rows = {
            r["id"]: r
            for r in await conn.fetch(
                """SELECT id, status, trust, project, source_kind, source_location, fingerprint,
                          stale_reason, stale_context
                   FROM facts WHERE bank_id = $1 AND id = ANY($2::bigint[])
                   ORDER BY id FOR UPDATE""",
                principal.bank_id,
                [c.id for c in cleaned],
            )
        }
        bad = []
        for i, c in enumerate(cleaned):
            row = rows.get(c.id)
            if row is None:
                bad.append(
                    {
                        "index": i,
                        "reasons": [reason(f"results[{i}].id", f"no fact #{c.id} in this bank")],
                    }
                )
            elif project is not None and row["project"] != project:
                bad.append(
                    {
                        "index": i,
                        "reasons": [
                            reason(
                                f"results[{i}].id",
                                f"fact #{c.id} is not a fact of project {project}",
                            )
                        ],
                    }
                )
            elif c.verdict == "moved" and (
                why := gate.check_source(row["source_kind"], c.location or "")
            ):
                bad.append({"index": i, "reasons": [reason(f"results[{i}].location", why)]})
        if bad:
            raise BatchRefused(bad)
        changed: list[int] = []
        fresh: list[int] = []
        for c in cleaned:
            row = rows[c.id]
            status = row["status"]
            if status in ("deleted", "superseded"):
                answer.skipped.append(Skipped(id=c.id, reason=f"fact #{c.id} is {status}"))
            elif c.verdict == "stale":
                if await _stale(w, row, c, project, answer):
                    changed.append(c.id)
                if c.successor is not None and (
                    cand := await queue.propose_successor(w, c.id, c.successor)
                ) is not None:
                    answer.proposed.append(cand)
            elif status == "stale":
                answer.skipped.append(
                    Skipped(
                        id=c.id,
                        reason=(
                            f"fact #{c.id} is stale: only a confirm with a fresh quote makes it "
                            "active again"
                        ),
                    )
                )
            elif c.verdict == "moved" and c.location != row["source_location"]:
                await conn.execute(
                    """UPDATE facts SET source_location = $2, fingerprint = $3::jsonb,
                              verified_at = now(), updated_at = now() WHERE id = $1""",
                    c.id,
                    c.location,
                    facts.fingerprint_json(c.fingerprint),  # none sent: the old one is wrong now
                )
                await w.event(
                    c.id,
                    "relocated",
                    before=row["trust"],
                    after=row["trust"],
                    reason=f"{row['source_location']} -> {c.location}"
                    + (f": {c.reason}" if c.reason else ""),
                    project=project,
                )
                answer.moved += 1
                changed.append(c.id)
            else:  # fresh, or moved to where it already is (a new fingerprint)
                if c.fingerprint is not None:
                    await conn.execute(
                        "UPDATE facts SET fingerprint = $2::jsonb WHERE id = $1",
                        c.id,
                        facts.fingerprint_json(c.fingerprint),
                    )
                fresh.append(c.id)
        if fresh:
            await conn.execute(
                "UPDATE facts SET verified_at = now() WHERE id = ANY($1::bigint[])", fresh
            )
            answer.fresh = len(fresh)
        answer.flagged = len(answer.flagged_ids)
        await w.audit(
            "fact.verify",
            project or "",
            {
                "fresh": answer.fresh,
                "moved": answer.moved,
                "stale": answer.stale,
                "still_stale": answer.still_stale,
                "flagged": answer.flagged_ids,
                "skipped": [s.id for s in answer.skipped],
                "proposed": answer.proposed,
            },
        )
        answer.changed = [await w.fact(i) for i in changed]
    for outcome in ("fresh", "moved", "stale", "still_stale"):
        STALENESS.labels(outcome=outcome).inc(getattr(answer, outcome))
    STALENESS.labels(outcome="skipped").inc(len(answer.skipped))
    return answer


async def _stale(
    w: ceremony.Write, row, c: Clean, project: str | None, answer: VerifyAnswer
) -> bool:
    """One stale verdict; True when the row changed."""
    t = row["trust"]
    if row["status"] == "stale":
        answer.still_stale += 1
        if (c.reason, c.context) == (row["stale_reason"], row["stale_context"] or ""):
            return False
        await w.conn.execute(
            "UPDATE facts SET stale_reason = $2, stale_context = $3, updated_at = now() "
            "WHERE id = $1",
            c.id,
            c.reason,
            c.context,
        )
        if c.reason != row["stale_reason"]:
            await w.event(
                c.id,
                "staled",
                before=t,
                after=t,
                reason=f"still stale: {c.reason}",
                project=project,
            )
        return True
    # Trust is left as it is: staleness is about the source, not a judgement of the claim.
    await w.conn.execute(
        """UPDATE facts SET status = 'stale', stale_reason = $2, stale_context = $3,
                  stale_since = now(), updated_at = now() WHERE id = $1""",
        c.id,
        c.reason,
        c.context,
    )
    await w.event(c.id, "staled", before=t, after=t, reason=c.reason, project=project)
    answer.stale += 1
    answer.flagged_ids += await derived.flag_dependents(w, c.id, f"turned stale: {c.reason}")
    return True
