"""What happens to a fact after it is retained: confirm, dispute, edit, delete, purge, history.

Trust changes lock the fact's row (`FOR UPDATE`) and compute from the locked value, so two
agents confirming and disputing at once both land, in some order, and neither is lost. Every
change writes a fact event (who, why, before, after), bumps the bank version and is audited.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence

import asyncpg

from factbank.errors import Refused
from factbank.models import Confirm, Fact, NewFact, Source
from factbank.redact import redaction
from factbank.store import ceremony, facts
from factbank.store.banks import Principal
from factbank.text import embedder, lexicon
from factbank.trust import DEFAULT as POLICY
from factbank.write import derived
from factbank.write.deps import Deps
from factbank.write.gate import MAX_TAG_CHARS, MAX_TAGS, Prepared, clean_questions
from factbank.write.retain.gating import embed_fact, gated
from factbank.write.retain.insert import set_questions


async def _locked(w: ceremony.Write, fact_id: int) -> asyncpg.Record:
    """The fact's row, locked for this write (after the bank row: the ceremony took it)."""
    row = await facts.get_row(w.conn, w.bank_id, fact_id, lock=True)
    if row["status"] == "deleted":
        raise Refused.one("id", f"fact #{fact_id} is deleted")
    return row


async def current_of(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> asyncpg.Record:
    """The end of `fact_id`'s supersede chain (itself when it is current): id and content."""
    return await conn.fetchrow(
        """WITH RECURSIVE chain(id, next, depth) AS (
               SELECT id, superseded_by, 0 FROM facts WHERE bank_id = $1 AND id = $2
               UNION ALL
               SELECT f.id, f.superseded_by, c.depth + 1 FROM facts f JOIN chain c
                      ON f.id = c.next AND f.bank_id = $1
               WHERE c.depth < 1000)
           SELECT f.id, f.content FROM chain c JOIN facts f ON f.id = c.id
           ORDER BY c.depth DESC LIMIT 1""",
        bank_id,
        fact_id,
    )


async def clean_reason(deps: Deps, principal: Principal, reason: str) -> str:
    """A reason a person typed, under the bank's policy: redacted, or refused naming `reason`."""
    if not reason:
        return reason
    return await asyncio.to_thread(
        redaction.clean_text, "reason", reason, principal.redaction_policy
    )


async def confirm(
    deps: Deps,
    principal: Principal,
    fact_id: int,
    reason: str = "",
    evidence: Confirm | None = None,
) -> Fact:
    """The fact held when checked: trust rises and decay restarts. With `evidence`:
    a fresh quote (location, fingerprint) re-anchors the fact, and a stale one becomes active
    again (event `refreshed`); the caller's project and remotes are recorded on the confirm
    event for the rule gate. A fact under review is reviewed (event `reviewed`). A stale fact
    confirmed without a fresh quote is refused: nobody looked at its source."""
    reason = await clean_reason(deps, principal, reason)
    where, refresh = await _evidence(deps, principal, fact_id, evidence)
    async with ceremony.write(deps.pool, principal) as w:
        row = await _locked(w, fact_id)
        if row["status"] == "superseded":
            # Confirming a retired claim raised its trust while nothing pointed at what
            # replaced it: name the successor instead.
            now = await current_of(w.conn, w.bank_id, fact_id)
            why = f" ({row['supersede_reason']})" if row["supersede_reason"] else ""
            raise Refused.one(
                "id",
                f"fact #{fact_id} is superseded by #{row['superseded_by']}{why}; the current "
                f"fact is #{now['id']}: {now['content']!r}. Confirm #{now['id']} if it holds, "
                f"or supersede #{now['id']} if #{fact_id}'s claim holds again",
            )
        if row["status"] == "stale" and refresh is None:
            raise Refused.one(
                "quote",
                f"fact #{fact_id} is stale ({row['stale_reason'] or 'its source changed'}): "
                "confirm it with a fresh quote from its source (and its location if it moved), "
                "or supersede it",
            )
        before = row["trust"]
        after = POLICY.stored(POLICY.confirm(before))
        status = row["status"]
        if status == "stale" or (status == "disputed" and POLICY.injectable(after)):
            status = "active" if POLICY.injectable(after) else "disputed"
        await w.conn.execute(
            "UPDATE facts SET trust = $2, status = $3, confirmed_at = now(), "
            "updated_at = now() WHERE id = $1",
            fact_id,
            after,
            status,
        )
        await w.event(fact_id, "confirmed", before=before, after=after, reason=reason, **where)
        done = await _refresh_and_review(w, row, refresh, trust=after)
        await w.audit("fact.confirm", str(fact_id), {"before": before, "after": after, **done})
        return await w.fact(fact_id)


async def dispute(deps: Deps, principal: Principal, fact_id: int, reason: str) -> Fact:
    if not reason.strip():
        raise Refused.one("reason", "say why the fact is wrong")
    reason = await clean_reason(deps, principal, reason)
    async with ceremony.write(deps.pool, principal) as w:
        row = await _locked(w, fact_id)
        before = row["trust"]
        after = POLICY.stored(POLICY.dispute(before))
        status = (
            "disputed"
            if row["status"] == "active" and not POLICY.injectable(after)
            else row["status"]
        )
        await w.conn.execute(
            "UPDATE facts SET trust = $2, status = $3, updated_at = now() WHERE id = $1",
            fact_id,
            after,
            status,
        )
        await w.event(fact_id, "disputed", before=before, after=after, reason=reason)
        await w.audit("fact.dispute", str(fact_id), {"before": before, "after": after})
        return await w.fact(fact_id)


async def _evidence(
    deps: Deps, principal: Principal, fact_id: int, evidence: Confirm | None
) -> tuple[dict, Prepared | None]:
    """What a confirm brings, cleaned before the transaction: where it was made ({project,
    remotes}, redacted under the bank's policy) and, when it carries a quote, location or
    fingerprint, the fact's evidence re-checked by the write gate (the one gate: the fact as
    stored, with the new quote, location and fingerprint)."""
    if evidence is None:
        return {}, None
    where: dict = {}
    if evidence.project or evidence.remotes:
        policy = principal.redaction_policy
        remotes = list(dict.fromkeys(r.strip() for r in evidence.remotes if r.strip()))
        clean = await asyncio.to_thread(
            redaction.clean_fields,
            {"project": (evidence.project or "").strip() or None, "remotes": remotes},
            policy,
        )
        where = {"project": clean["project"], "remotes": list(clean["remotes"] or [])}
    if evidence.quote is None and evidence.location is None and evidence.fingerprint is None:
        return where, None
    async with deps.pool.acquire() as conn:
        row = await facts.get_row(conn, principal.bank_id, fact_id)
        fp = evidence.fingerprint
        if fp is None and evidence.location is None and row["fingerprint"] is not None:
            fp = facts.to_fact(row).fingerprint  # the same place: its fingerprint stands
        item = NewFact(
            content=row["content"],
            category=row["category"],
            source=Source(
                kind=row["source_kind"],
                location=row["source_location"] if evidence.location is None
                else evidence.location,
            ),
            quote=row["quote"] if evidence.quote is None else evidence.quote,
            origin=row["origin"],
            tentative=row["tentative"],
            tags=list(row["tags"]),
            questions=list(row["questions"]),
            project=row["project"],
            fingerprint=fp,
        )
        prepared, errors = await gated(conn, deps, principal, [item])
    if errors:
        raise Refused(errors[0]["reasons"])
    return where, prepared[0]


async def _refresh_and_review(
    w: ceremony.Write, row: asyncpg.Record, refresh: Prepared | None, *, trust: float
) -> dict:
    """A confirm's lifecycle steps: the evidence re-anchored (a stale fact's stale cleared)
    and a review flag cleared. Returns what happened, for the audit row. `trust`: the fact's
    trust after the confirm (`row` was read before it), which these events neither change
    nor report as it was (they showed 0.5 -> 0.5 after a confirm to 0.65)."""
    fact_id, t = row["id"], trust
    done: dict = {}
    if refresh is not None:
        await w.conn.execute(
            """UPDATE facts SET quote = $2, source_location = $3, fingerprint = $4::jsonb,
                      verified_at = now(), stale_reason = NULL, stale_context = NULL,
                      stale_since = NULL
               WHERE id = $1""",
            fact_id,
            refresh.quote,
            refresh.source_location,
            facts.fingerprint_json(refresh.fingerprint),
        )
        moved = (
            f" (was {row['source_location']})"
            if refresh.source_location != row["source_location"]
            else ""
        )
        why = (
            f"fresh quote from {refresh.source_location or 'its source'}{moved}"
            + (f"; was stale: {row['stale_reason']}" if row["status"] == "stale" else "")
        )
        await w.event(fact_id, "refreshed", before=t, after=t, reason=why)
        done["refreshed"] = True
    if row["review_since"] is not None:
        await w.conn.execute(
            "UPDATE facts SET review_reason = NULL, review_cause = NULL, review_since = NULL "
            "WHERE id = $1",
            fact_id,
        )
        await w.event(
            fact_id,
            "reviewed",
            before=t,
            after=t,
            reason=f"review cleared: {row['review_reason'] or 'a cited fact changed'}",
            related=row["review_cause"]
            if row["review_cause"] is not None
            and await w.conn.fetchval("SELECT 1 FROM facts WHERE id = $1", row["review_cause"])
            else None,
        )
        done["reviewed"] = True
    return done


async def edit(
    deps: Deps,
    principal: Principal,
    fact_id: int,
    *,
    tags: Sequence[str] | None = None,
    category: str | None = None,
    questions: Sequence[str] | None = None,
) -> Fact:
    """Change tags, category and/or questions (the list given replaces the fact's). Tags are
    indexed by both legs and questions by BM25 and their own vectors, so those are rebuilt."""
    if tags is None and category is None and questions is None:
        raise Refused.one("tags", "nothing to change: give tags, category or questions")
    clean_qs = None
    if questions is not None:
        reasons: list[dict[str, str]] = []
        clean_qs = clean_questions(list(questions), reasons)
        if reasons:
            raise Refused(reasons)
    clean_tags = None
    if tags is not None:
        clean_tags = list(dict.fromkeys(" ".join(t.split()) for t in tags if t.strip()))
        if len(clean_tags) > MAX_TAGS or any(len(t) > MAX_TAG_CHARS for t in clean_tags):
            raise Refused.one(
                "tags", f"at most {MAX_TAGS} tags of at most {MAX_TAG_CHARS} characters"
            )
    if clean_tags or clean_qs or category:
        # Redacted like a new fact's, or refused (422 naming tags[i]/questions[i]) in a bank
        # with the reject policy. A category holding one is unknown: the refusal names it
        # redacted.
        policy = principal.redaction_policy
        fields = {"tags": clean_tags or [], "questions": clean_qs or [], "category": category}
        clean = await asyncio.to_thread(redaction.clean_fields, fields, policy)
        if clean_tags:
            clean_tags = list(clean["tags"] or [])
        if clean_qs:
            clean_qs = list(clean["questions"] or [])
        category = clean["category"] if category else category
    async with deps.pool.acquire() as conn:
        row = await facts.get_row(conn, principal.bank_id, fact_id)
        new_tags = clean_tags if clean_tags is not None else list(row["tags"])
        new_qs = clean_qs if clean_qs is not None else list(row["questions"])
        text = lexicon.indexed_text(row["content"], new_tags)
        vectors = None
        if deps.embedder is not None:
            vectors = (await embed_fact(conn, deps.embedder, [(text, new_qs)]))[0]
        vector = vectors.fact if vectors is not None else None
        async with ceremony.begin(conn, principal) as w:
            row = await _locked(w, fact_id)
            if category is not None and not await facts.category_exists(
                conn, principal.bank_id, category
            ):
                raise Refused.one("category", f"unknown category {category!r}")
            await conn.execute(
                """UPDATE facts SET tags = $2, category = $3, updated_at = now(),
                          embedding_model = coalesce($4, embedding_model) WHERE id = $1""",
                fact_id,
                new_tags,
                category or row["category"],
                deps.embedder.name if deps.embedder and vector is not None else None,
            )
            await set_questions(conn, principal.bank_id, fact_id, new_qs, vectors)
            changes = {
                k: v
                for k, v in (
                    ("tags", clean_tags),
                    ("category", category),
                    ("questions", clean_qs is not None),
                )
                if v
            }
            await w.event(
                fact_id,
                "edited",
                before=row["trust"],
                after=row["trust"],
                reason=", ".join(f"{k} changed" for k in changes),
            )
            await w.audit("fact.edit", str(fact_id), {"changed": sorted(changes)})
            return await w.fact(fact_id)


async def delete(deps: Deps, principal: Principal, fact_id: int, reason: str = "") -> Fact:
    """Soft delete: the row and its history stay (audited); it is no longer searchable."""
    reason = await clean_reason(deps, principal, reason)
    async with ceremony.write(deps.pool, principal) as w:
        row = await _locked(w, fact_id)
        await w.conn.execute(
            "UPDATE facts SET status = 'deleted', updated_at = now() WHERE id = $1", fact_id
        )
        await lexicon.unindex_fact(w.conn, principal.bank_id, fact_id)
        await w.conn.execute("DELETE FROM fact_vectors WHERE fact_id = $1", fact_id)
        await w.event(fact_id, "deleted", before=row["trust"], after=row["trust"], reason=reason)
        flagged = await derived.flag_dependents(w, fact_id, "was deleted")
        # The audit log outlives a purge: it keeps the reason's hash, never its words.
        await w.audit(
            "fact.delete",
            str(fact_id),
            {
                "reason_sha256": hashlib.sha256(reason.encode()).hexdigest() if reason else "",
                "flagged": flagged,
            },
        )
        return await w.fact(fact_id)


async def purge(deps: Deps, principal: Principal, fact_id: int) -> dict:
    """Hard delete (admin): the row, its events, postings and its cached embedding if unused.

    The audit log keeps that a purge happened, by whom, of which id, never the content."""
    async with ceremony.write(deps.pool, principal) as w:
        conn = w.conn
        row = await facts.get_row(conn, principal.bank_id, fact_id, lock=True)
        # Its dependents learn it is gone (a deleted fact's were flagged when it was deleted);
        # the flag keeps naming it by id.
        flagged = (
            await derived.flag_dependents(w, fact_id, "was purged")
            if row["status"] != "deleted"
            else []
        )
        if row["indexed"]:
            await lexicon.unindex_fact(conn, principal.bank_id, fact_id)
        await conn.execute(
            "UPDATE facts SET superseded_by = NULL WHERE superseded_by = $1", fact_id
        )
        await conn.execute(
            "UPDATE fact_events SET related_fact = NULL WHERE related_fact = $1", fact_id
        )
        await conn.execute("DELETE FROM facts WHERE id = $1", fact_id)
        # The cached embeddings of its texts go too, whoever else embedded the same text:
        # the cache is only a cache (every fact keeps its own vectors), and deciding by other
        # users would tell this bank whether another bank holds the same text.
        cache_removed = 0
        if row["embedding_model"]:
            texts = [lexicon.indexed_text(row["content"], list(row["tags"]))]
            texts += list(row["questions"])
            result = await conn.execute(
                "DELETE FROM embedding_cache WHERE model = $1 AND content_hash = ANY($2::bytea[])",
                row["embedding_model"],
                [embedder.text_hash(t) for t in texts],
            )
            cache_removed = int(result.rsplit(" ", 1)[-1])
        await w.audit(
            "fact.purge", str(fact_id), {"cache_rows_removed": cache_removed, "flagged": flagged}
        )
    return {"purged": fact_id, "cache_rows_removed": cache_removed}


async def history(pool: asyncpg.Pool, principal: Principal, fact_id: int) -> dict:
    """A fact with every event, the facts it superseded, and its successor chain."""
    async with pool.acquire() as conn:
        fact = await facts.get_fact(conn, principal.bank_id, fact_id)
        predecessors = await conn.fetch(
            "SELECT id FROM facts WHERE bank_id = $1 AND superseded_by = $2 ORDER BY id",
            principal.bank_id,
            fact_id,
        )
        chain: list[Fact] = []
        current = fact
        seen = {fact.id}
        while current.superseded_by is not None and current.superseded_by not in seen:
            current = await facts.get_fact(conn, principal.bank_id, current.superseded_by)
            seen.add(current.id)
            chain.append(current)
        return {
            "fact": fact,
            "events": await facts.events(conn, principal.bank_id, fact_id),
            "supersedes": [
                await facts.get_fact(conn, principal.bank_id, r["id"]) for r in predecessors
            ],
            "successors": chain,
            "current": chain[-1] if chain else fact,
        }
