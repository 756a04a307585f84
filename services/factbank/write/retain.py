"""Retain: add a fact, add many (one transaction), supersede. The write gate, redaction,
embedding and the duplicate-vs-correction decision all happen here, once, for every caller.

A near-duplicate (same bank, category and project; cosine >= NEAR, or the same normalised
text) reinforces the existing fact only when `claims.compare` says it makes the same claim.
Otherwise the new fact is stored and the response names the old ones it may supersede, so
"port 8080" followed by "port 8081" never strengthens the claim it contradicts (principle 3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
import numpy as np

from factbank.errors import BatchRefused, NotFound, Refused, reason
from factbank.models import Fact, NewFact
from factbank.read import embedder, lexicon
from factbank.read.tokenizer import language
from factbank.runtime.observability import REDACTIONS, WRITES
from factbank.runtime.settings import Settings
from factbank.store import banks, ceremony, facts
from factbank.store.banks import Principal
from factbank.trust import DEFAULT as POLICY
from factbank.write import claims, gate
from factbank.write.gate import Prepared

NEAR = 0.90  # cosine of e5-small passages: "port 8080" vs "port 8081" 0.988, unrelated ~0.86


@dataclass
class Deps:
    """What writes need: the pool, the settings, and the embedder (None: lexical only)."""

    pool: asyncpg.Pool
    settings: Settings
    embedder: embedder.Embedder | None


@dataclass
class Outcome:
    status: str  # "stored" | "reinforced"
    fact: Fact
    possible_duplicate_of: list[int] = field(default_factory=list)
    redacted: list[dict[str, str]] = field(default_factory=list)
    note: str = ""


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
    items: Sequence[NewFact], max_chars: int, policy: str, agent: str, categories: set[str]
) -> tuple[list[Prepared | None], list[dict]]:
    prepared: list[Prepared | None] = []
    errors: list[dict] = []
    for i, item in enumerate(items):
        try:
            p = gate.check(item, max_chars=max_chars, policy=policy, agent=agent)
            if p.category not in categories:
                known = ", ".join(sorted(categories))
                raise Refused.one("category", f"unknown category {p.category!r}; known: {known}")
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
    policy = await banks.redaction_policy(conn, principal.bank_id)
    rows = await conn.fetch("SELECT name FROM categories WHERE bank_id = $1", principal.bank_id)
    categories = {r["name"] for r in rows}
    return await asyncio.to_thread(
        _gate_all, items, deps.settings.max_fact_chars, policy, principal.agent, categories
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


async def _near_duplicates(
    conn: asyncpg.Connection, bank_id: int, p: Prepared, vectors: Vectors
) -> list[asyncpg.Record]:
    """Same bank, category and project: the same normalised text first, then the nearest by
    cosine >= NEAR (an index lookup and an HNSW scan, never a pass over the whole bank)."""
    same = """SELECT id, content, 2.0 AS similarity FROM facts
              WHERE bank_id = $1 AND content_hash = $4 AND category = $2
                AND project IS NOT DISTINCT FROM $3 AND status IN ('active', 'disputed')"""
    rows = list(
        await conn.fetch(same, bank_id, p.category, p.project, facts.content_hash(p.content))
    )
    vector = vectors.fact
    if vector is not None:
        async with conn.transaction():
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            near = await conn.fetch(
                """SELECT id, content, 1 - (embedding <=> $4) AS similarity FROM facts
                   WHERE bank_id = $1 AND category = $2 AND project IS NOT DISTINCT FROM $3
                     AND status IN ('active', 'disputed') AND embedding IS NOT NULL
                   ORDER BY embedding <=> $4 LIMIT 5""",
                bank_id,
                p.category,
                p.project,
                vector,
            )
        known = {r["id"] for r in rows}
        rows += [r for r in near if r["similarity"] >= NEAR and r["id"] not in known]
    return rows


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
                              created_by_agent, content_hash, embedding, embedding_model,
                              questions)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
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
        facts.content_hash(p.content),
        vector,
        model,
        p.questions,
    )
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
    """Count and audit one retained fact (the audit keeps redaction kinds, never text)."""
    WRITES.labels(status=status).inc()
    for finding in p.redacted:
        REDACTIONS.labels(kind=finding.kind).inc()
    await w.audit(
        f"fact.{status}",
        str(fact_id),
        {"redacted": [f.kind for f in p.redacted], "possible_duplicate_of": possible},
    )


Done = tuple[str, int, list[int], str, Prepared]  # (status, fact id, possible, note, fact)


def _redacted(p: Prepared) -> list[dict[str, str]]:
    """What an outcome says was redacted: field and kind, never the text."""
    return [{"field": f.field, "kind": f.kind} for f in p.redacted]


async def _outcomes(w: ceremony.Write, done: Sequence[Done]) -> list[Outcome]:
    """What a batch answers: each fact as stored now, with its duplicates, redactions, note."""
    return [
        Outcome(status, await w.fact(fact_id), possible, _redacted(p), note)
        for status, fact_id, possible, note, p in done
    ]


async def add_many(deps: Deps, principal: Principal, items: Sequence[NewFact]) -> list[Outcome]:
    """Retain facts in ONE transaction: any refusal refuses the whole batch, per-item reasons."""
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
        return await _outcomes(w, done)


async def add(deps: Deps, principal: Principal, item: NewFact) -> Outcome:
    try:
        return (await add_many(deps, principal, [item]))[0]
    except BatchRefused as exc:
        raise Refused(exc.errors[0]["reasons"]) from None


async def supersede(
    deps: Deps, principal: Principal, item: NewFact, replaces: Sequence[int], reason: str
) -> Outcome:
    """Store the new fact and retire the ones it replaces, linked to it with the reason."""
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
            if row["status"] in ("superseded", "deleted"):
                raise Refused.one("replaces", f"fact #{old_id} is already {row['status']}")
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
        await w.audit("fact.supersede", str(new_id), {"replaces": [o["id"] for o in olds]})
        fact = await w.fact(new_id)
    return Outcome(
        "stored", fact, [], _redacted(p), f"supersedes #{', #'.join(str(o['id']) for o in olds)}"
    )


# --- import that round-trips an export (additive: `add_many` is unchanged) ----------------


@dataclass
class Restore:
    """What an exported fact carries back into a bank: its id there (for the history), its
    status, stored trust, last confirmation and supersede link. `superseded_by` is an id in the
    bank imported into (the client maps exported ids to the ids its earlier chunks got)."""

    old_id: int
    status: str
    trust: float
    superseded_by: int | None = None
    supersede_reason: str | None = None
    confirmed_at: object = None  # datetime or None


async def import_many(
    deps: Deps,
    principal: Principal,
    items: Sequence[NewFact],
    restores: Sequence[Restore | None],
    *,
    skip_present: bool = True,
) -> list[Outcome]:
    """An import in ONE transaction that does not double anything it re-imports.

    A fact already in the bank (same content hash, category and project, in any status) is
    not stored again and not reinforced: its outcome is "present". A fact new to the bank that
    carries a `Restore` is stored as it was exported (status, trust, supersede link); one
    without is retained like `add_many` (a repeat in other words still reinforces). Only the
    facts to store are embedded."""
    from factbank.write import redaction  # local: keeps this addition out of the module's imports

    async with deps.pool.acquire() as conn:
        prepared, errors = await _gated(conn, deps, principal, items)
        if errors:
            raise BatchRefused(errors)
        keys = [(facts.content_hash(p.content), p.category, p.project) for p in prepared if p]
        present: dict[tuple, int] = {}
        if skip_present:
            rows = await conn.fetch(
                """SELECT id, content_hash, category, project FROM facts
                   WHERE bank_id = $1 AND content_hash = ANY($2::bytea[])
                   ORDER BY (status = 'active') DESC, id""",
                principal.bank_id,
                list({k[0] for k in keys}),
            )
            for r in rows:
                present.setdefault((bytes(r["content_hash"]), r["category"], r["project"]), r["id"])
        todo = [i for i, k in enumerate(keys) if k not in present]
        vectors = [Vectors() for _ in items]
        if deps.embedder is not None and todo:
            embedded = await embed_fact(
                conn,
                deps.embedder,
                [
                    (lexicon.indexed_text(prepared[i].content, prepared[i].tags),
                     prepared[i].questions)
                    for i in todo
                ],
            )
            for i, v in zip(todo, embedded, strict=True):
                vectors[i] = v
        reasons = await asyncio.to_thread(
            lambda: [
                redaction.redact_text(r.supersede_reason, "supersede_reason")[0]
                if r is not None and r.supersede_reason
                else None
                for r in restores
            ]
        )
    done: list[Done] = []
    async with ceremony.write(deps.pool, principal) as w:
        conn = w.conn
        for i, (p, v, r) in enumerate(zip(prepared, vectors, restores, strict=True)):
            assert p is not None
            key = keys[i]
            if key in present:
                done.append(("present", present[key], [], "already in this bank; not changed", p))
                continue
            if r is None:
                status, fact_id, possible, note = await _retain_one(w, p, v, _model(deps))
            else:
                if r.superseded_by is not None and not await conn.fetchval(
                    "SELECT 1 FROM facts WHERE bank_id = $1 AND id = $2",
                    principal.bank_id,
                    r.superseded_by,
                ):
                    why = f"no fact #{r.superseded_by} in this bank (import its successor first)"
                    raise BatchRefused([{"index": i, "reasons": [reason("superseded_by", why)]}])
                fact_id = await _restore_one(w, p, v, _model(deps), r, reasons[i])
                status, possible, note = "stored", [], f"restored as {r.status}"
            present[key] = fact_id  # a repeat later in the same import is "present"
            done.append((status, fact_id, possible, note, p))
            await _recorded(w, status, fact_id, p, possible)
        # Nothing recorded (every fact present): the ceremony leaves the version, caches valid.
        return await _outcomes(w, done)


async def _restore_one(
    w: ceremony.Write,
    p: Prepared,
    vectors: Vectors,
    model: str | None,
    r: Restore,
    supersede_reason: str | None,
) -> int:
    conn = w.conn
    fact_id = await _insert(
        w, p, vectors, model,
        why=f"imported (exported as #{r.old_id}, {r.status}, trust {r.trust:.2f})",
    )
    await conn.execute(
        """UPDATE facts SET status = $2, trust = $3, superseded_by = $4, supersede_reason = $5,
                  confirmed_at = COALESCE($6, confirmed_at) WHERE id = $1""",
        fact_id, r.status, r.trust, r.superseded_by, supersede_reason, r.confirmed_at,
    )
    if r.status == "deleted":  # like lifecycle.delete: not searchable by either leg
        await lexicon.unindex_fact(conn, w.bank_id, fact_id)
        await conn.execute("DELETE FROM fact_vectors WHERE fact_id = $1", fact_id)
    return fact_id
