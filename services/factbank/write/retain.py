"""Retain: add a fact, add many (one transaction), supersede. The write gate, redaction,
embedding and the duplicate-vs-correction decision all happen here, once, for every caller.

A near-duplicate (same bank, category and project; cosine >= NEAR, or the same normalised
text) reinforces the existing fact only when `claims.compare` says it makes the same claim.
Otherwise the new fact is stored and the response names the old ones it may supersede, so
"port 8080" followed by "port 8081" never strengthens the claim it contradicts
(docs/principles.md#corrections-do-not-reinforce).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np

from factbank.errors import BatchRefused, NotFound, Refused, reason
from factbank.models import Fact, NewFact, Via
from factbank.observability import REDACTIONS, VECTOR_QUEUE, WRITES
from factbank.store import ceremony, facts
from factbank.store.banks import Principal
from factbank.text import claims, embedder, lexicon
from factbank.text.claims import NEAR
from factbank.text.tokenizer import language, tokenize
from factbank.trust import DEFAULT as POLICY
from factbank.write import derived, gate, misses
from factbank.write import vectors as vector_queue
from factbank.write.deps import Deps
from factbank.write.gate import Prepared


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


def _model(deps: Deps) -> str | None:
    return deps.embedder.name if deps.embedder is not None else None


@dataclass
class Vectors:
    """A prepared fact's vectors: its own (content + tags) and one per writer question."""

    fact: np.ndarray | None = None
    questions: list[np.ndarray] = field(default_factory=list)


async def embed_fact(
    conn: asyncpg.Connection, model: embedder.Embedder, items: Sequence[tuple[str, Sequence[str]]]
) -> list[Vectors]:
    """Embed facts given as (own text, questions) in ONE embedder call: the own texts and every
    question batched together (a single add with four questions costs one forward pass)."""
    texts = [text for text, _ in items] + [q for _, questions in items for q in questions]
    vectors = await embedder.embed_passages(conn, model, texts) if texts else []
    out, at = [], len(items)
    for i, (_, questions) in enumerate(items):
        out.append(Vectors(vectors[i], list(vectors[at : at + len(questions)])))
        at += len(questions)
    return out


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


def _gate_all(
    items: Sequence[NewFact],
    max_chars: int,
    policy: str,
    agent: str,
    categories: set[str],
    cited: dict[int, tuple[str, str]] | None = None,
) -> tuple[list[Prepared | None], list[dict]]:
    prepared: list[Prepared | None] = []
    errors: list[dict] = []
    for i, item in enumerate(items):
        try:
            p = gate.check(item, max_chars=max_chars, policy=policy, agent=agent)
            if p.category not in categories:
                known = ", ".join(sorted(categories))
                raise Refused.one("category", f"unknown category {p.category!r}; known: {known}")
            restoring = getattr(item, "restore", None) is not None  # an exported fact
            if p.cites and (why := gate.check_citations(p, cited or {}, restoring=restoring)):
                raise Refused(why)
            prepared.append(p)
        except Refused as exc:
            prepared.append(None)
            errors.append({"index": i, "reasons": exc.reasons})
    return prepared, errors


async def _gated(
    conn: asyncpg.Connection, deps: Deps, principal: Principal, items: Sequence[NewFact]
) -> tuple[list[Prepared | None], list[dict]]:
    """The write gate for a batch, under the bank's redaction policy and category registry.
    The gate (redaction above all) is CPU work: in a thread, so a large import never holds
    the event loop that both services' other callers share."""
    rows = await conn.fetch("SELECT name FROM categories WHERE bank_id = $1", principal.bank_id)
    categories = {r["name"] for r in rows}
    cited = await derived.cited_rows(conn, principal.bank_id, items)
    return await asyncio.to_thread(
        _gate_all, items, deps.settings.max_fact_chars, principal.redaction_policy,
        principal.agent, categories, cited,
    )


async def prepare(
    deps: Deps, principal: Principal, items: Sequence[NewFact]
) -> tuple[list[Prepared | None], list[dict], list[Vectors]]:
    """Gate and embed a batch outside any transaction; returns (prepared, errors, vectors)."""
    async with deps.pool.acquire() as conn:
        prepared, errors = await _gated(conn, deps, principal, items)
        vectors = [Vectors() for _ in items]
        if deps.embedder is not None and not errors:
            ok = [(i, p) for i, p in enumerate(prepared) if p is not None]
            embedded = await embed_fact(
                conn,
                deps.embedder,
                [(lexicon.indexed_text(p.content, p.tags), p.questions) for _, p in ok],
            )
            for (i, _), v in zip(ok, embedded, strict=True):
                vectors[i] = v
    return prepared, errors, vectors


# The facts of a bank, category and project nearest a vector, by their own vector (ord 0 in
# fact_vectors, the one vector store: migration 0014), through the one HNSW index. `statuses`:
# an extra condition on the fact's status. The index scan filters bank and ord, the join the
# rest; iterative scans keep reading the graph until five rows pass.
NEAREST_OWN = """SELECT f.id, f.content, f.status, 1 - (v.embedding <=> $4) AS similarity
                 FROM fact_vectors v JOIN facts f ON f.id = v.fact_id
                 WHERE v.bank_id = $1 AND v.ord = 0 AND f.category = $2
                   AND f.project IS NOT DISTINCT FROM $3 {statuses}
                 ORDER BY v.embedding <=> $4 LIMIT 5"""


async def _near_duplicates(
    conn: asyncpg.Connection, bank_id: int, p: Prepared, vectors: Vectors
) -> list[asyncpg.Record]:
    """Same bank, category and project: the same normalised text first, then the nearest by
    cosine >= NEAR (an index lookup and an HNSW scan, never a pass over the whole bank)."""
    same = """SELECT id, content, 2.0 AS similarity FROM facts
              WHERE bank_id = $1 AND content_hash = $4 AND category = $2
                AND project IS NOT DISTINCT FROM $3 AND status IN ('active', 'disputed')"""
    rows = list(await conn.fetch(same, bank_id, p.category, p.project, p.content_hash))
    vector = vectors.fact
    if vector is not None:
        async with conn.transaction():
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            near = await conn.fetch(
                NEAREST_OWN.format(statuses="AND f.status IN ('active', 'disputed')"),
                bank_id,
                p.category,
                p.project,
                vector,
            )
        known = {r["id"] for r in rows}
        rows += [r for r in near if r["similarity"] >= NEAR and r["id"] not in known]
    return rows


RETIRED = ("superseded", "deleted")


async def _retired_match(
    conn: asyncpg.Connection, bank_id: int, p: Prepared, vectors: Vectors
) -> int | None:
    """A fact of the bank, retired (superseded or deleted), that makes the same claim as `p`
    ("add X, supersede it with Y, add X again" stored X as a new active fact that
    ranked first). The same normalised text, then the nearest retired facts by meaning
    (cosine >= NEAR) that `claims.compare` calls the same claim. Asked only when no active fact
    makes the claim, so an add that reinforces pays nothing more."""
    exact = await conn.fetchval(
        """SELECT id FROM facts WHERE bank_id = $1 AND content_hash = $4 AND category = $2
             AND project IS NOT DISTINCT FROM $3 AND status IN ('superseded', 'deleted')
           ORDER BY id DESC LIMIT 1""",
        bank_id, p.category, p.project, p.content_hash,
    )
    if exact is not None or vectors.fact is None:
        return exact
    async with conn.transaction():
        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # The nearest facts in any status, the retired kept: the same scan as the active
        # near-duplicates'. Filtering on a retired status inside the scan instead walked up to
        # hnsw.max_scan_tuples in a bank with few retired facts.
        near = await conn.fetch(
            NEAREST_OWN.format(statuses=""), bank_id, p.category, p.project, vectors.fact
        )
    for row in near:
        if row["status"] in RETIRED and row["similarity"] >= NEAR and (
            await asyncio.to_thread(claims.compare, p.content, row["content"])
        ).same_claim:
            return row["id"]
    return None


async def retired_answer(
    conn: asyncpg.Connection, bank_id: int, fact_id: int
) -> tuple[Fact | None, Via, str]:
    """What an add of a retired claim answers: the fact that holds now (following the
    supersede chain; None when the chain ends in a delete), the link with its reason, and a
    note saying how to store the claim again (an explicit supersede)."""
    row = await conn.fetchrow(
        "SELECT id, status, superseded_by, supersede_reason FROM facts WHERE id = $1", fact_id
    )
    via = Via(superseded=fact_id, reason=row["supersede_reason"])
    seen = {fact_id}
    while row["superseded_by"] is not None and row["superseded_by"] not in seen:
        seen.add(row["superseded_by"])
        nxt = await conn.fetchrow(
            "SELECT id, status, superseded_by FROM facts WHERE bank_id = $1 AND id = $2",
            bank_id, row["superseded_by"],
        )
        if nxt is None:
            break
        row = nxt
    if row["status"] in RETIRED or row["id"] == fact_id:
        why = await conn.fetchval(
            "SELECT reason FROM fact_events WHERE fact_id = $1 AND kind = 'deleted' "
            "ORDER BY id DESC LIMIT 1",
            row["id"],
        )
        via = Via(superseded=fact_id, reason=via.reason or why or None)
        return None, via, (
            f"not stored: this claim was deleted as #{row['id']}"
            + (f" ({why})" if why else "")
            + f"; to store it again, supersede #{row['id']} with it"
        )
    successor = await facts.get_fact(conn, bank_id, row["id"])
    return successor, via, (
        f"not stored: this claim was superseded (#{fact_id} -> #{row['id']}"
        + (f": {via.reason}" if via.reason else "")
        + f"); to store it again, supersede #{row['id']} with it"
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


async def _retain_one(
    w: ceremony.Write, p: Prepared, vectors: Vectors, model: str | None
) -> tuple[str, int, list[int], str]:
    possible: list[int] = []
    for old in await _near_duplicates(w.conn, w.bank_id, p, vectors):
        verdict = await asyncio.to_thread(claims.compare, p.content, old["content"])
        if verdict.same_claim:
            await _reinforce(w, p, old, verdict.reason)
            await _merge_questions(w.conn, w.bank_id, old["id"], p.questions, vectors)
            return "reinforced", old["id"], [], verdict.reason
        possible.append(old["id"])
    if (retired := await _retired_match(w.conn, w.bank_id, p, vectors)) is not None:
        return "retired", retired, [], ""
    fact_id = await _insert(w, p, vectors, model)
    note = ""
    if possible:
        note = (
            f"similar to #{', #'.join(map(str, possible))} but not the same claim; "
            "if this corrects it, supersede it"
        )
    return "stored", fact_id, possible, note


async def _recorded(
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


def _redacted(p: Prepared) -> list[dict[str, str]]:
    """What an outcome says was redacted: field and kind, never the text."""
    return [{"field": f.field, "kind": f.kind} for f in p.redacted]


async def _outcomes(w: ceremony.Write, done: Sequence[Done]) -> list[Outcome]:
    """What a batch answers: each fact as stored now, with its duplicates, redactions, note
    (the facts read back in one query)."""
    stored = await facts.get_facts(w.conn, w.bank_id, [d[1] for d in done])
    out = []
    for (status, fact_id, possible, note, p), fact in zip(done, stored, strict=True):
        outcome = Outcome(status, fact, possible, _redacted(p), note)
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
            status, fact_id, possible, note = await _retain_one(w, p, v, _model(deps))
            done.append((status, fact_id, possible, note, p))
            await _recorded(w, status, fact_id, p, possible)
            await misses.after_add(w, status, fact_id, possible, p.project, p.agent)
        if then is not None:
            await then(w, done[0][1])
        return await _outcomes(w, done)


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
            _model(deps),
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
        "stored", fact, [], _redacted(p), f"supersedes #{', #'.join(str(o['id']) for o in olds)}"
    )


# --- import that round-trips an export (additive: `add_many` is unchanged) ----------------


@dataclass
class Restore:
    """What an exported fact carries back into a bank: its id there (for the history), its
    status, stored trust, last confirmation and supersede link. `superseded_by` is an id in the
    bank imported into (the client maps exported ids to the ids its earlier chunks got).
    `clamped`: what `bound_restores` lowered, said in the fact's history and the outcome."""

    old_id: int
    status: str
    trust: float
    superseded_by: int | None = None
    supersede_reason: str | None = None
    confirmed_at: datetime | None = None
    clamped: tuple[str, ...] = ()


# The highest trust an admin's restore may carry: any trust below 1 is reachable by confirms
# (t += 0.30(1-t)), 1.0 itself only by rounding, and a fact at 1.0 heads every session block.
RESTORE_CEILING = 0.99
# A confirmation this far ahead of the server's clock is a clock skew, not a forgery.
CLOCK_SKEW = timedelta(minutes=5)
# The history kind that says a restored fact arrived in a retired or doubted state.
RESTORED_EVENT = {"superseded": "superseded", "deleted": "deleted", "disputed": "disputed",
                  "stale": "staled"}


def bound_restores(
    principal: Principal,
    ready: Sequence[Prepared],
    restores: Sequence[Restore | None],
    now: datetime,
) -> tuple[list[Restore | None], list[dict]]:
    """Every restored value bounded to what an export of a bank could have produced (once
    a write token imported `trust: 1.0, confirmed_at: 9999-12-31` and got a fact that
    never decayed and headed every session block).

    Who may restore what: anyone with write scope may restore a fact's status (every status is
    a step down from what an add stores) and an EARLIER confirmation (it only decays sooner),
    but not a trust above what an add of the same origin gives (`initial`): a higher one is
    clamped to it and said so. An admin token restores trust as exported, up to
    `RESTORE_CEILING`. For everyone: a confirmation in the future is refused (no export holds
    one), a supersede link needs status "superseded", and its reason is kept on one line
    (redacted and bounded at 500 characters before it gets here). Links are checked against
    the bank in `import_many` (only between facts restored by the same importer)."""
    admin = principal.can("admin")
    out: list[Restore | None] = []
    errors: list[dict] = []
    for i, (p, r) in enumerate(zip(ready, restores, strict=True)):
        if r is None:
            out.append(None)
            continue
        at = r.confirmed_at
        if at is not None and at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        bad = []
        if at is not None and at > now + CLOCK_SKEW:
            bad.append(reason("restore.confirmed_at",
                              f"{at.isoformat()} is in the future; an export never holds one"))
        if r.superseded_by is not None and r.status != "superseded":
            bad.append(reason("restore.superseded_by",
                              f"a supersede link needs status 'superseded', not {r.status!r}"))
        if bad:
            errors.append({"index": i, "reasons": bad})
            out.append(None)
            continue
        cap = RESTORE_CEILING if admin else POLICY.initial(p.origin, p.tentative)
        clamped = []
        trust = r.trust
        if trust > cap:
            trust = cap
            clamped.append(f"trust {r.trust:.2f} clamped to {cap:.2f}" + (
                "" if admin else f" (what an add of an {p.origin} fact gets; restoring a "
                "higher trust needs an admin token)"))
        # The gate's redacted copy of the reason (`Prepared.restore_reason`), on one line.
        why = p.restore_reason if r.superseded_by is not None else None
        out.append(dataclasses.replace(
            r, trust=POLICY.stored(trust), confirmed_at=at,
            supersede_reason=" ".join(why.split()) if why else None, clamped=tuple(clamped),
        ))
    return out, errors


@vector_queue.deferring
async def import_many(
    deps: Deps,
    principal: Principal,
    items: Sequence[NewFact],
    restores: Sequence[Restore | None],
    *,
    skip_present: bool = True,
    vectors: str = "now",
) -> list[Outcome]:
    """An import in ONE transaction that does not double anything it re-imports.

    A fact already in the bank (same content hash, category and project, in any status) is
    not stored again and not reinforced: its outcome is "present", and so is a repeat later in
    the same import. A fact new to the bank that carries a `Restore` is stored as it was
    exported (status, trust, supersede link); one without is retained like `add_many` (a
    repeat in other words still reinforces) -- unless `vectors="queue"`. `items` are the
    import's lines: the gate redacts a line's `restore.supersede_reason` with its other fields,
    and that copy is what is stored (`bound_restores`).

    Set-based (3,000 facts took 5 min): the facts to store go in with one COPY per
    table (facts, citations, vectors, postings, events, audit, queue) instead of about a dozen
    round trips a fact, after everything CPU-bound (gate, tokenising, embedding, redaction)
    ran outside the transaction and off the event loop.

    `vectors="queue"`: nothing is embedded here; the facts are queued in `vector_queue` and the
    embedder worker (`factbank.write.vectors`) fills their vectors after the commit. The lexical
    leg finds them at once. A fact without `restore` is then stored without the near-duplicate
    check by meaning (it has no vector yet): an exact repeat is still "present"."""
    queue = vectors == "queue" and deps.embedder is not None
    async with deps.pool.acquire() as conn:
        prepared, errors = await _gated(conn, deps, principal, items)
        if errors:
            raise BatchRefused(errors)
        ready = [p for p in prepared if p is not None]
        restores, errors = bound_restores(
            principal, ready, restores, await conn.fetchval("SELECT now()")
        )
        if errors:
            raise BatchRefused(errors)
        keys = [(p.content_hash, p.category, p.project) for p in ready]
        known: dict[tuple, int] = {}
        rows = await conn.fetch(
            """SELECT id, content_hash, category, project FROM facts
               WHERE bank_id = $1 AND content_hash = ANY($2::bytea[])
               ORDER BY (status = 'active') DESC, id""",
            principal.bank_id,
            list({k[0] for k in keys}),
        )
        for r in rows:
            known.setdefault((bytes(r["content_hash"]), r["category"], r["project"]), r["id"])
        present = known if skip_present else {}
        first: dict[tuple, int] = {}  # key -> index of the line that stores it
        for i, k in enumerate(keys):
            if k not in present:
                first.setdefault(k, i)
        todo = sorted(first.values())
        # Per fact (the near-duplicate check needs each fact's vector and a claim comparison):
        # lines without `restore`, unless their vectors are queued (then only a repeat of a
        # stored text, which may reinforce it), and every repeat of a stored text, restored or
        # not (existing=reinforce: it reinforces the fact, or answers "retired"; a restore of
        # it stored an exact duplicate). Everything else in bulk.
        single = [i for i in todo if keys[i] in known or (restores[i] is None and not queue)]
        per_fact = set(single)
        bulk = [i for i in todo if i not in per_fact]
        vecs = [Vectors() for _ in items]
        new_vectors: dict = {}
        if deps.embedder is not None and not queue and todo:
            texts = [lexicon.indexed_text(ready[i].content, ready[i].tags) for i in todo]
            texts += [q for i in todo for q in ready[i].questions]
            got, new_vectors = await embedder.passages_unstored(conn, deps.embedder, texts)
            at = len(todo)
            for n, i in enumerate(todo):
                k = len(ready[i].questions)
                vecs[i] = Vectors(got[n], list(got[at : at + k]))
                at += k
        # The gate redacted each line's restore.supersede_reason with its other fields, and
        # bound_restores kept that copy on one line.
        reasons = [r.supersede_reason if r is not None else None for r in restores]
        tokens = await asyncio.to_thread(
            lambda: {
                i: tokenize(lexicon.lexical_text(ready[i].content, ready[i].tags,
                                                 ready[i].questions))
                for i in bulk
                if restores[i] is None or restores[i].status != "deleted"
            }
        )
    model = _model(deps)
    async with ceremony.write(deps.pool, principal) as w:
        conn = w.conn
        targets = {
            restores[i].superseded_by: i for i in reversed(bulk)
            if restores[i] is not None and restores[i].superseded_by is not None
        }
        if targets:
            # A restored link may only join facts of the same import: its target must be a
            # fact this member restored (its "created" event is an import's). A link onto
            # anyone else's fact planted a reason that recall showed as `via.reason`.
            found = {
                r["id"]
                for r in await conn.fetch(
                    f"""SELECT f.id FROM facts f
                        WHERE f.bank_id = $1 AND f.id = ANY($2::bigint[])
                          AND f.created_by_member = $3
                          AND EXISTS (SELECT 1 FROM fact_events e
                                      WHERE e.fact_id = f.id AND e.kind = 'created'
                                        AND e.reason LIKE '{IMPORTED}%')""",
                    principal.bank_id,
                    list(targets),
                    principal.member_id,
                )
            }
            bad = [
                {"index": i, "reasons": [reason(
                    "restore.superseded_by",
                    f"#{target} is not a fact restored by this import: a restored supersede "
                    "link joins only facts of the same import (import its successor first)",
                )]}
                for target, i in sorted(targets.items(), key=lambda t: t[1])
                if target not in found
            ]
            if bad:
                raise BatchRefused(bad)
        if deps.embedder is not None:
            await embedder.remember(conn, deps.embedder, new_vectors)
        stored = await _insert_bulk(
            w,
            [
                Bulk(ready[i], vecs[i], restores[i], reasons[i], tokens.get(i))
                for i in bulk
            ],
            model,
            queue=queue,
        )
        ids = dict(zip(bulk, stored, strict=True))
        await w.audits(
            [
                ("fact.stored", str(ids[i]),
                 {"redacted": [f.kind for f in ready[i].redacted], "possible_duplicate_of": []}
                 | _restored_detail(restores[i]))
                for i in bulk
            ]
        )
        WRITES.labels(status="stored").inc(len(bulk))
        outcome: dict[int, tuple[str, int, list[int], str]] = {}
        for i in bulk:
            for finding in ready[i].redacted:
                REDACTIONS.labels(kind=finding.kind).inc()
            r = restores[i]
            note = "; ".join([f"restored as {r.status}", *r.clamped]) if r is not None else (
                "vectors queued; not checked for near-duplicates by meaning"
            )
            outcome[i] = ("stored", ids[i], [], note)
        for i in single:
            status, fact_id, possible, note = await _retain_one(w, ready[i], vecs[i], model)
            outcome[i] = (status, fact_id, possible, note)
            await _recorded(w, status, fact_id, ready[i], possible)
            if queue and status == "stored":
                await conn.execute(
                    "INSERT INTO vector_queue (fact_id, bank_id) VALUES ($1, $2)",
                    fact_id, principal.bank_id,
                )
                VECTOR_QUEUE.labels(result="queued").inc()
        done: list[Done] = []
        for i, (p, k) in enumerate(zip(ready, keys, strict=True)):
            if i in outcome:
                done.append((*outcome[i], p))
            else:
                fact_id = present.get(k) or outcome[first[k]][1]
                done.append(("present", fact_id, [], "already in this bank; not changed", p))
        # Nothing recorded (every fact present): the ceremony leaves the version, caches valid.
        return await _outcomes(w, done)


IMPORTED = "imported (exported as #"  # how a restored fact's "created" event begins


def _restored_detail(r: Restore | None) -> dict:
    """What a restored fact's audit row adds: the values restored and what was clamped."""
    if r is None:
        return {}
    return {"restored": {"exported_id": r.old_id, "status": r.status, "trust": r.trust,
                         "superseded_by": r.superseded_by, "clamped": list(r.clamped)}}


@dataclass
class Bulk:
    """A fact for `_insert_bulk`: gated, its vectors (maybe none), its restore record and
    cleaned supersede reason, and its BM25 tokens (None: not indexed, a deleted fact)."""

    p: Prepared
    vectors: Vectors
    restore: Restore | None
    supersede_reason: str | None
    tokens: list[str] | None


FACT_COLUMNS = [
    "id", "bank_id", "content", "category", "tags", "source_kind", "source_location", "quote",
    "project", "origin", "tentative", "trust", "status", "superseded_by", "supersede_reason",
    "created_by_member", "created_by_agent", "created_at", "updated_at", "confirmed_at",
    "content_hash", "embedding_model", "questions", "fingerprint", "doc_len",
    "indexed",
]


def _bulk_rows(
    rows: Sequence[Bulk],
    ids: Sequence[int],
    bank_id: int,
    member: int,
    now: object,
    model: str | None,
    queue: bool,
) -> tuple[list, list, list, list, list[facts.Event], list, Counter[str], int]:
    """The rows `_insert_bulk` copies into each table, for facts that got `ids`."""
    records, citations, vectors, postings, events, queued = [], [], [], [], [], []
    df: Counter[str] = Counter()
    total_len = 0
    for fact_id, b in zip(ids, rows, strict=True):
        p, r, v = b.p, b.restore, b.vectors
        t = POLICY.stored(POLICY.initial(p.origin, p.tentative))
        status = r.status if r is not None else "active"
        indexed = b.tokens is not None
        records.append((
            fact_id, bank_id, p.content, p.category, p.tags, p.source_kind, p.source_location,
            p.quote, p.project, p.origin, p.tentative, r.trust if r is not None else t, status,
            r.superseded_by if r is not None else None, b.supersede_reason, member, p.agent,
            now, now, (r.confirmed_at if r is not None else None) or now,
            p.content_hash, model if v.fact is not None else None,
            p.questions, facts.fingerprint_json(p.fingerprint),
            len(b.tokens) if indexed else 0, indexed,
        ))
        citations += [(fact_id, c, bank_id) for c in dict.fromkeys(p.cites)]
        if v.fact is not None and status != "deleted":
            vectors.append((fact_id, bank_id, 0, language(p.content), v.fact))
            vectors += [
                (fact_id, bank_id, n, language(q), qv)
                for n, (q, qv) in enumerate(zip(p.questions, v.questions, strict=True), 1)
            ]
        if indexed:
            counts = Counter(b.tokens)
            postings += [(bank_id, term, fact_id, counts[term], len(b.tokens)) for term in counts]
            df.update(counts.keys())
            total_len += len(b.tokens)
        why = (
            f"{IMPORTED}{r.old_id}, {r.status}, trust {r.trust:.2f}"
            + "".join(f"; {c}" for c in r.clamped) + ")"
            if r is not None
            else "origin " + p.origin + (", tentative" if p.tentative else "")
        )
        after = r.trust if r is not None else t
        events.append(facts.Event(fact_id, "created", None, after, member, p.agent, why))
        if r is not None and r.status in RESTORED_EVENT:
            # The state it arrived in is part of its history too (every fact a restore
            # touches has an event saying so): a retired fact whose only event says "created"
            # read as if someone had retired it by hand, unrecorded.
            events.append(facts.Event(
                fact_id, RESTORED_EVENT[r.status], after, after, member, p.agent,
                f"restored as {r.status}" + (f": {b.supersede_reason}" if b.supersede_reason
                                             else ""),
                r.superseded_by,
            ))
        if queue and status != "deleted":
            queued.append((fact_id, bank_id))
    return records, citations, vectors, postings, events, queued, df, total_len


async def _insert_bulk(
    w: ceremony.Write, rows: Sequence[Bulk], model: str | None, *, queue: bool
) -> list[int]:
    """Store facts as `_insert` (+ `_restore_one`) stores each, set-based: the same rows in
    facts, fact_citations, fact_vectors, postings, term_df, the bank's BM25 statistics and
    fact_events (one "created" event each), plus a `vector_queue` row per fact when `queue`.
    Ids are drawn from the facts sequence first, so every table is written with one COPY."""
    if not rows:
        return []
    conn, bank_id, member = w.conn, w.bank_id, w.principal.member_id
    ids = sorted(
        r["id"]
        for r in await conn.fetch(
            "SELECT nextval(pg_get_serial_sequence('facts', 'id')) AS id "
            "FROM generate_series(1, $1)",
            len(rows),
        )
    )
    now = await conn.fetchval("SELECT now()")
    # Building a chunk's rows (languages, term counts) is CPU work: in a thread.
    records, citations, vectors, postings, events, queued, df, total_len = await asyncio.to_thread(
        _bulk_rows, rows, ids, bank_id, member, now, model, queue
    )
    await conn.copy_records_to_table("facts", columns=FACT_COLUMNS, records=records)
    if citations:
        await conn.copy_records_to_table(
            "fact_citations", columns=["fact_id", "cites", "bank_id"], records=citations
        )
    if vectors:
        await conn.copy_records_to_table(
            "fact_vectors", columns=["fact_id", "bank_id", "ord", "lang", "embedding"],
            records=vectors,
        )
    if postings:
        await conn.execute(
            "UPDATE banks SET doc_count = doc_count + $2, total_len = total_len + $3 "
            "WHERE id = $1",
            bank_id,
            sum(1 for b in rows if b.tokens is not None),
            total_len,
        )
        await conn.copy_records_to_table(
            "postings", columns=["bank_id", "term", "fact_id", "tf", "doc_len"], records=postings
        )
        await lexicon.add_document_frequencies(conn, bank_id, df)
    if queued:
        await conn.copy_records_to_table(
            "vector_queue", columns=["fact_id", "bank_id"], records=queued
        )
        VECTOR_QUEUE.labels(result="queued").inc(len(queued))
    await w.events(events)
    return ids
