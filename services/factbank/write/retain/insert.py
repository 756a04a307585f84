"""The insert step and the paths that end in it: a fact stored, reinforced (its repeat makes the
same claim) or answered "retired"; `add`, `add_many` (one transaction) and `supersede`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import asyncpg

from factbank.errors import BatchRefused, NotFound, Refused
from factbank.models import Fact, NewFact, Via
from factbank.observability import REDACTIONS, WRITES
from factbank.store import ceremony, facts
from factbank.store.banks import Principal
from factbank.text import claims, embedder, lexicon
from factbank.text.tokenizer import language
from factbank.trust import DEFAULT as POLICY
from factbank.write import derived, gate, misses
from factbank.write.deps import Deps
from factbank.write.gate import Prepared
from factbank.write.retain.gating import Vectors, model_name, prepare, redacted
from factbank.write.retain.near import near_duplicates
from factbank.write.retain.retired import retired_answer, retired_match


@dataclass
class Outcome:
    status: str  # "stored" | "reinforced" | "present" | "retired"
    fact: Fact
    possible_duplicate_of: list[int] = field(default_factory=list)
    redacted: list[dict[str, str]] = field(default_factory=list)
    note: str = ""
    # "retired": the claim was already superseded (or deleted) in this bank. `fact` is the
    # retired fact, `successor` the fact that holds now (None after a delete) and `via` the
    # link with its reason, as recall answers a retired hit. Nothing was stored.
    successor: Fact | None = None
    via: Via | None = None
    # Which bank it went to and who can read it (`banks.audience`), set by the route.
    visible_to: dict | None = None


async def store_vectors(
    conn: asyncpg.Connection,
    bank_id: int,
    fact_id: int,
    content: str,
    questions: Sequence[str],
    vectors: Vectors,
) -> None:
    """Replace a fact's rows in `fact_vectors`: ord 0 its own vector (the language of its
    content), ord i its i-th question's (that question's language). Nothing without vectors."""
    await conn.execute("DELETE FROM fact_vectors WHERE fact_id = $1", fact_id)
    if vectors.fact is None:
        return
    rows = [(fact_id, bank_id, 0, language(content), vectors.fact)]
    rows += [
        (fact_id, bank_id, i, language(q), v)
        for i, (q, v) in enumerate(zip(questions, vectors.questions, strict=True), 1)
    ]
    await conn.executemany(
        "INSERT INTO fact_vectors (fact_id, bank_id, ord, lang, embedding) "
        "VALUES ($1, $2, $3, $4, $5)",
        rows,
    )


async def _reinforce(w: ceremony.Write, p: Prepared, old: asyncpg.Record, why: str) -> None:
    principal = w.principal
    row = await w.conn.fetchrow(
        "SELECT trust, created_by_member, created_by_agent FROM facts WHERE id = $1 FOR UPDATE",
        old["id"],
    )
    by_other = row["created_by_member"] != principal.member_id or (
        p.agent and row["created_by_agent"] and p.agent != row["created_by_agent"]
    )
    after = POLICY.stored(POLICY.reinforce(row["trust"], bool(by_other)))
    await w.conn.execute(
        "UPDATE facts SET trust = $2, updated_at = now() WHERE id = $1", old["id"], after
    )
    await w.event(
        old["id"],
        "reinforced",
        before=row["trust"],
        after=after,
        agent=p.agent,
        reason=(
            "saved again by another "
            + ("member" if row["created_by_member"] != principal.member_id else "agent")
            if by_other
            else "saved again"
        )
        + f": {why}",
    )


async def set_questions(
    conn: asyncpg.Connection,
    bank_id: int,
    fact_id: int,
    questions: Sequence[str],
    vectors: Vectors | None,
) -> None:
    """Give a fact this list of questions: the column, its vectors (kept as they are when the
    embedder is down: `None`) and the BM25 postings, in the caller's transaction."""
    row = await conn.fetchrow(
        "UPDATE facts SET questions = $2, updated_at = now() WHERE id = $1 "
        "RETURNING content, tags, indexed",
        fact_id,
        list(questions),
    )
    if vectors is not None:
        await store_vectors(conn, bank_id, fact_id, row["content"], questions, vectors)
    if row["indexed"]:
        await lexicon.unindex_fact(conn, bank_id, fact_id)
        await lexicon.index_fact(
            conn, bank_id, fact_id, lexicon.lexical_text(row["content"], row["tags"], questions)
        )


async def _merge_questions(
    conn: asyncpg.Connection, bank_id: int, fact_id: int, new: Sequence[str], vectors: Vectors
) -> None:
    """A repeat of a claim may bring questions the stored fact lacks: they are added (up to
    the limit), so the second writer's way of asking finds the fact too."""
    old = list(await conn.fetchval("SELECT questions FROM facts WHERE id = $1", fact_id))
    known = {q.casefold() for q in old}
    added = [(i, q) for i, q in enumerate(new) if q.casefold() not in known]
    added = added[: max(0, gate.MAX_QUESTIONS - len(old))]
    if not added:
        return
    merged = old + [q for _, q in added]
    kept = None
    if vectors.fact is not None and len(vectors.questions) == len(new):
        rows = await conn.fetch(
            "SELECT ord, embedding FROM fact_vectors WHERE fact_id = $1 ORDER BY ord", fact_id
        )
        if len(rows) == len(old) + 1:
            stored = [embedder.as_array(r["embedding"]) for r in rows]
            kept = Vectors(stored[0], stored[1:] + [vectors.questions[i] for i, _ in added])
    await set_questions(conn, bank_id, fact_id, merged, kept)


async def _insert(
    w: ceremony.Write, p: Prepared, vectors: Vectors, model: str | None, *, why: str = ""
) -> int:
    conn, principal = w.conn, w.principal
    t = POLICY.stored(POLICY.initial(p.origin, p.tentative))
    vector = vectors.fact
    model = model if vector is not None else None
    fact_id = await conn.fetchval(
        """INSERT INTO facts (bank_id, content, category, tags, source_kind, source_location,
                              quote, project, origin, tentative, trust, created_by_member,
                              created_by_agent, content_hash, embedding_model, questions,
                              fingerprint)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                   $17::jsonb)
           RETURNING id""",
        principal.bank_id,
        p.content,
        p.category,
        p.tags,
        p.source_kind,
        p.source_location,
        p.quote,
        p.project,
        p.origin,
        p.tentative,
        t,
        principal.member_id,
        p.agent,
        p.content_hash,
        model,
        p.questions,
        facts.fingerprint_json(p.fingerprint),
    )
    await derived.store_citations(conn, principal.bank_id, fact_id, p.cites)
    await store_vectors(conn, principal.bank_id, fact_id, p.content, p.questions, vectors)
    await lexicon.index_fact(
        conn, principal.bank_id, fact_id, lexicon.lexical_text(p.content, p.tags, p.questions)
    )
    origin = p.origin + (", tentative" if p.tentative else "")
    await w.event(
        fact_id, "created", before=None, after=t, agent=p.agent, reason=why or f"origin {origin}"
    )
    return fact_id


async def retain_one(
    w: ceremony.Write, p: Prepared, vectors: Vectors, model: str | None
) -> tuple[str, int, list[int], str]:
    possible: list[int] = []
    for old in await near_duplicates(w.conn, w.bank_id, p, vectors):
        verdict = await asyncio.to_thread(claims.compare, p.content, old["content"])
        if verdict.same_claim:
            await _reinforce(w, p, old, verdict.reason)
            await _merge_questions(w.conn, w.bank_id, old["id"], p.questions, vectors)
            return "reinforced", old["id"], [], verdict.reason
        possible.append(old["id"])
    if (retired := await retired_match(w.conn, w.bank_id, p, vectors)) is not None:
        return "retired", retired, [], ""
    fact_id = await _insert(w, p, vectors, model)
    note = ""
    if possible:
        note = (
            f"similar to #{', #'.join(map(str, possible))} but not the same claim; "
            "if this corrects it, supersede it"
        )
    return "stored", fact_id, possible, note


async def recorded(
    w: ceremony.Write, status: str, fact_id: int, p: Prepared, possible: list[int]
) -> None:
    """Count and audit one retained fact (the audit keeps redaction kinds, never text). A
    retired claim's answer changed nothing: nothing to count or audit."""
    if status == "retired":
        return
    WRITES.labels(status=status).inc()
    for finding in p.redacted:
        REDACTIONS.labels(kind=finding.kind).inc()
    await w.audit(
        f"fact.{status}",
        str(fact_id),
        {"redacted": [f.kind for f in p.redacted], "possible_duplicate_of": possible},
    )


Done = tuple[str, int, list[int], str, Prepared]
# A step run last inside a write's transaction, given the fact id it stored.
Then = Callable[[ceremony.Write, int], Awaitable[None]]  # (status, fact id, possible, note, fact)


async def outcomes(w: ceremony.Write, done: Sequence[Done]) -> list[Outcome]:
    """What a batch answers: each fact as stored now, with its duplicates, redactions, note
    (the facts read back in one query)."""
    stored = await facts.get_facts(w.conn, w.bank_id, [d[1] for d in done])
    out = []
    for (status, fact_id, possible, note, p), fact in zip(done, stored, strict=True):
        outcome = Outcome(status, fact, possible, redacted(p), note)
        if status == "retired":
            outcome.successor, outcome.via, outcome.note = await retired_answer(
                w.conn, w.bank_id, fact_id
            )
        out.append(outcome)
    return out


async def add_many(
    deps: Deps, principal: Principal, items: Sequence[NewFact], *, then: Then | None = None
) -> list[Outcome]:
    """Retain facts in ONE transaction: any refusal refuses the whole batch, per-item reasons.
    `then(w, first fact id)` runs last inside it (the review queue marks its candidate)."""
    prepared, errors, vectors = await prepare(deps, principal, items)
    if errors:
        raise BatchRefused(errors)
    done: list[Done] = []
    async with ceremony.write(deps.pool, principal) as w:
        for p, v in zip(prepared, vectors, strict=True):
            assert p is not None
            status, fact_id, possible, note = await retain_one(w, p, v, model_name(deps))
            done.append((status, fact_id, possible, note, p))
            await recorded(w, status, fact_id, p, possible)
            await misses.after_add(w, status, fact_id, possible, p.project, p.agent)
        if then is not None:
            await then(w, done[0][1])
        return await outcomes(w, done)


async def add(deps: Deps, principal: Principal, item: NewFact) -> Outcome:
    try:
        return (await add_many(deps, principal, [item]))[0]
    except BatchRefused as exc:
        raise Refused(exc.errors[0]["reasons"]) from None


async def supersede(
    deps: Deps,
    principal: Principal,
    item: NewFact,
    replaces: Sequence[int],
    reason: str,
    *,
    then: Then | None = None,
) -> Outcome:
    """Store the new fact and retire the ones it replaces, linked to it with the reason.
    `then(w, new id)` runs last in the same transaction (the review queue marks its candidate
    accepted there, so two accepts of one candidate store one fact)."""
    if not reason.strip():
        raise Refused.one("reason", "say why the old fact no longer holds")
    if not replaces:
        raise Refused.one("replaces", "name at least one fact id to supersede")
    prepared, errors, vectors = await prepare(deps, principal, [item])
    if errors:
        raise Refused(errors[0]["reasons"])
    p = prepared[0]
    assert p is not None
    async with ceremony.write(deps.pool, principal) as w:
        olds = []
        for old_id in dict.fromkeys(replaces):
            row = await w.conn.fetchrow(
                "SELECT id, trust, status FROM facts WHERE bank_id = $1 AND id = $2 FOR UPDATE",
                principal.bank_id,
                old_id,
            )
            if row is None:
                raise NotFound(f"no fact #{old_id} in this bank")
            # A deleted fact may be superseded: that is how a deleted claim is stored again
            # (an add of it answers "retired"). A superseded one: supersede its successor.
            if row["status"] == "superseded":
                raise Refused.one("replaces", f"fact #{old_id} is already superseded")
            olds.append(row)
        new_id = await _insert(
            w,
            p,
            vectors[0],
            model_name(deps),
            why=f"supersedes #{', #'.join(str(o['id']) for o in olds)}: {reason}",
        )
        for old in olds:
            after = POLICY.stored(POLICY.supersede(old["trust"]))
            await w.conn.execute(
                """UPDATE facts SET status = 'superseded', trust = $2, superseded_by = $3,
                          supersede_reason = $4, updated_at = now() WHERE id = $1""",
                old["id"],
                after,
                new_id,
                reason,
            )
            await w.event(
                old["id"],
                "superseded",
                before=old["trust"],
                after=after,
                agent=p.agent,
                reason=reason,
                related=new_id,
            )
        flagged = [
            f for o in olds for f in await derived.flag_dependents(
                w, o["id"], "was superseded", exclude=[new_id]
            )
        ]
        await w.audit(
            "fact.supersede", str(new_id), {"replaces": [o["id"] for o in olds], "flagged": flagged}
        )
        await misses.after_supersede(w, new_id, [o["id"] for o in olds], p.project, p.agent)
        if then is not None:
            await then(w, new_id)
        fact = await w.fact(new_id)
    return Outcome(
        "stored", fact, [], redacted(p), f"supersedes #{', #'.join(str(o['id']) for o in olds)}"
    )

