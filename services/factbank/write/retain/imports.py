"""Import that round-trips an export, in one transaction, set-based (additive: `add_many` is
unchanged): an exported fact's status, trust and supersede link restored within bounds, a fact
already in the bank answered "present", the rest stored with one COPY per table."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from factbank.errors import BatchRefused, reason
from factbank.models import NewFact
from factbank.observability import REDACTIONS, VECTOR_QUEUE, WRITES
from factbank.store import ceremony, facts
from factbank.store.banks import Principal
from factbank.text import embedder, lexicon
from factbank.text.tokenizer import language, tokenize
from factbank.trust import DEFAULT as POLICY
from factbank.write import vectors as vector_queue
from factbank.write.deps import Deps
from factbank.write.gate import Prepared
from factbank.write.retain.gating import Vectors, gated, model_name
from factbank.write.retain.insert import Done, Outcome, outcomes, recorded, retain_one


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
        prepared, errors = await gated(conn, deps, principal, items)
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
    model = model_name(deps)
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
            status, fact_id, possible, note = await retain_one(w, ready[i], vecs[i], model)
            outcome[i] = (status, fact_id, possible, note)
            await recorded(w, status, fact_id, ready[i], possible)
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
        return await outcomes(w, done)


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
