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
from factbank.models import Fact
from factbank.read import embedder, lexicon
from factbank.store import banks, ceremony, facts
from factbank.store.banks import Principal
from factbank.trust import DEFAULT as POLICY
from factbank.write import redaction, retain
from factbank.write.gate import MAX_TAG_CHARS, MAX_TAGS, clean_questions
from factbank.write.retain import Deps


async def _locked(w: ceremony.Write, fact_id: int) -> asyncpg.Record:
    """The fact's row, locked for this write (after the bank row: the ceremony took it)."""
    row = await facts.get_row(w.conn, w.bank_id, fact_id, lock=True)
    if row["status"] == "deleted":
        raise Refused.one("id", f"fact #{fact_id} is deleted")
    return row


async def policy_of(pool: asyncpg.Pool, bank_id: int) -> str:
    async with pool.acquire() as conn:
        return await banks.redaction_policy(conn, bank_id)


async def clean_reason(deps: Deps, principal: Principal, reason: str) -> str:
    """A reason a person typed, under the bank's policy: redacted, or refused naming `reason`."""
    if not reason:
        return reason
    policy = await policy_of(deps.pool, principal.bank_id)
    return await asyncio.to_thread(redaction.clean_text, "reason", reason, policy)


async def _judge(deps: Deps, principal: Principal, fact_id: int, kind: str, reason: str) -> Fact:
    reason = await clean_reason(deps, principal, reason)
    async with ceremony.write(deps.pool, principal) as w:
        row = await _locked(w, fact_id)
        before = row["trust"]
        if kind == "confirmed":
            after = POLICY.stored(POLICY.confirm(before))
            status = (
                "active"
                if row["status"] == "disputed" and POLICY.injectable(after)
                else row["status"]
            )
            await w.conn.execute(
                "UPDATE facts SET trust = $2, status = $3, confirmed_at = now(), "
                "updated_at = now() WHERE id = $1",
                fact_id,
                after,
                status,
            )
        else:
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
        await w.event(fact_id, kind, before=before, after=after, reason=reason)
        action = {"confirmed": "fact.confirm", "disputed": "fact.dispute"}[kind]
        await w.audit(action, str(fact_id), {"before": before, "after": after})
        return await w.fact(fact_id)


async def confirm(deps: Deps, principal: Principal, fact_id: int, reason: str = "") -> Fact:
    return await _judge(deps, principal, fact_id, "confirmed", reason)


async def dispute(deps: Deps, principal: Principal, fact_id: int, reason: str) -> Fact:
    if not reason.strip():
        raise Refused.one("reason", "say why the fact is wrong")
    return await _judge(deps, principal, fact_id, "disputed", reason)


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
        policy = await policy_of(deps.pool, principal.bank_id)
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
            vectors = (await retain.embed_fact(conn, deps.embedder, [(text, new_qs)]))[0]
        vector = vectors.fact if vectors is not None else None
        async with ceremony.begin(conn, principal) as w:
            row = await _locked(w, fact_id)
            if category is not None and not await facts.category_exists(
                conn, principal.bank_id, category
            ):
                raise Refused.one("category", f"unknown category {category!r}")
            await conn.execute(
                """UPDATE facts SET tags = $2, category = $3, updated_at = now(),
                          embedding = coalesce($4::vector, embedding),
                          embedding_model = coalesce($5, embedding_model) WHERE id = $1""",
                fact_id,
                new_tags,
                category or row["category"],
                vector,
                deps.embedder.name if deps.embedder and vector is not None else None,
            )
            await retain.set_questions(conn, principal.bank_id, fact_id, new_qs, vectors)
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
        # The audit log outlives a purge: it keeps the reason's hash, never its words.
        await w.audit(
            "fact.delete",
            str(fact_id),
            {"reason_sha256": hashlib.sha256(reason.encode()).hexdigest() if reason else ""},
        )
        return await w.fact(fact_id)


async def purge(deps: Deps, principal: Principal, fact_id: int) -> dict:
    """Hard delete (admin): the row, its events, postings and its cached embedding if unused.

    The audit log keeps that a purge happened, by whom, of which id, never the content."""
    async with ceremony.write(deps.pool, principal) as w:
        conn = w.conn
        row = await facts.get_row(conn, principal.bank_id, fact_id, lock=True)
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
        await w.audit("fact.purge", str(fact_id), {"cache_rows_removed": cache_removed})
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
