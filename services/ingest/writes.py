"""Write paths of the ingest service: validate, store, audit, in one transaction each."""

from __future__ import annotations

import msgspec
from factbank import audit, facts, trust
from factbank.banks import Principal
from factbank.models import Fact, NewFact
from factbank.web import GateRefused, Runtime


class AddResult(msgspec.Struct, kw_only=True):
    status: str  # "stored"
    fact: Fact


async def add(rt: Runtime, principal: Principal, new: NewFact) -> AddResult:
    content = new.content.strip()
    if not content:
        raise GateRefused("content is empty", field="content")
    if len(content) > rt.settings.max_fact_chars:
        raise GateRefused(
            f"content is {len(content)} characters; the limit is {rt.settings.max_fact_chars}",
            field="content",
        )
    if not new.quote.strip():
        raise GateRefused("a verbatim quote from the source is required", field="quote")
    assert rt.pool is not None
    async with rt.pool.acquire() as conn, conn.transaction():
        if not await facts.category_exists(conn, principal.bank_id, new.category):
            raise GateRefused(
                f"unknown category {new.category!r}; see GET /v1/categories", field="category"
            )
        t = trust.DEFAULT.initial(new.origin, new.tentative)
        agent = new.agent or principal.agent
        fact_id = await conn.fetchval(
            """INSERT INTO facts (bank_id, content, category, tags, source_kind, source_location,
                                  quote, project, origin, tentative, trust, created_by_member,
                                  created_by_agent, content_hash)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
               RETURNING id""",
            principal.bank_id, content, new.category, new.tags, new.source.kind,
            new.source.location, new.quote, new.project, new.origin, new.tentative, t,
            principal.member_id, agent, facts.content_hash(content),
        )
        await conn.execute(
            """INSERT INTO fact_events
                   (fact_id, bank_id, kind, trust_after, member_id, agent, reason)
               VALUES ($1, $2, 'created', $3, $4, $5, $6)""",
            fact_id, principal.bank_id, t, principal.member_id, agent, f"origin {new.origin}",
        )
        await conn.execute(
            "UPDATE banks SET version = version + 1 WHERE id = $1", principal.bank_id
        )
        await audit.append(conn, principal.actor(), "fact.add", str(fact_id))
        fact = await facts.get_fact(conn, principal.bank_id, fact_id)
    return AddResult(status="stored", fact=fact)
