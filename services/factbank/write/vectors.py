"""The vector queue's worker: fills the vectors of facts an import committed without them.

An import with `vectors=queue` stores facts, postings, events and audit rows set-based and
queues the facts in `vector_queue` (migration 0007), so the commit does not wait for the
embedder: on this 2-core machine the embedder reads about 40 passages/s and an imported fact
has 1 + its questions passages (5 with four questions), which capped an import at ~7 facts/s.

The ingest service runs one worker (`run`) per process unless FACTBANK_VECTOR_BATCH=0, and
`factbank serve worker` runs it on its own (services/worker). Any number of workers drain the
same queue: a round claims its rows with a lease (migration 0010), so no fact is embedded by
two workers at once, and a dead worker's rows are taken again once their lease expires. A round
takes at most `batch` queued facts (the oldest first), reads their passages from the facts as
they are now, embeds them off the event loop (the engine's fair lock is held for one 16-passage
call at a time, so a search waits for at most one such call), then in one transaction per bank
locks the facts it fills (SKIP LOCKED: never waiting on a writer), deletes their queue rows,
writes `fact_vectors` (the one vector store, migration 0014), `facts.embedding_model` and the
new `embedding_cache` rows, and then bumps the
bank's version (`ceremony.index`: no bank lock while the HNSW inserts run).
A worker that stops anywhere before that commit leaves the rows queued: nothing is lost, the
next round (or the next start) embeds them again. A fact edited meanwhile (other text than
was embedded) stays queued for the next round; a deleted or purged one leaves the queue.

Counted in `factbank_vector_queue_total{result}`; `/v1/stats` shows `vectors_pending`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import asyncpg

from factbank.observability import VECTOR_QUEUE
from factbank.store import ceremony
from factbank.text import embedder as embedding
from factbank.text import lexicon
from factbank.text.tokenizer import language

log = logging.getLogger(__name__)
# Imports first, vectors after: while this process runs an import (`deferring`, around
# `retain.import_many`) the worker waits (at most MAX_DEFER_S in a row, then one round), since
# both compete for the same two cores and the embedder is the bottleneck either way (the queue
# empties no later). Measured on 30,000 facts with the worker running alongside: the commit
# rate fell from 115 to 79 facts/s. QUIET_S covers the client's turn between two chunks of one
# import (it sends the next as soon as the last answered). It was 2 s counted from the queue
# insert, before the chunk's commit, when no import in flight was known: every import's
# vectors then waited ~2 s after its end, 10-15% of a 200-fact drain on a quiet machine.
QUIET_S = 0.5
MAX_DEFER_S = 60.0
_imports = 0  # imports running in this process now
_import_seen = 0.0  # when the last one ended
BATCH = 32  # facts a round: ~160 passages with four questions each, ~4 s of engine time here
MAX_ATTEMPTS = 3  # rounds a fact may fail before the worker leaves it (counted, still pending)
IDLE_S = 1.0  # how often an idle worker looks at the queue (one index scan)

LEASE_S = 300.0  # a claim's life: a round takes ~4 s here, ~30 s at load 12; a dead worker's
#                 rows are taken again after this (migration 0010)
P = ParamSpec("P")
T = TypeVar("T")
WORKER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

# One statement claims a round: rows nobody holds (or whose claim expired), the oldest first,
# skipping rows another worker is claiming this very moment. Then the facts' text is read.
_CLAIM = """WITH c AS (
               SELECT fact_id FROM vector_queue
               WHERE attempts < $2 AND (claimed_until IS NULL OR claimed_until < now())
               ORDER BY attempts, queued_at, fact_id LIMIT $1
               FOR UPDATE SKIP LOCKED)
           UPDATE vector_queue q
           SET claimed_by = $3, claimed_until = now() + make_interval(secs => $4)
           FROM c WHERE q.fact_id = c.fact_id
           RETURNING q.fact_id"""
_TAKE = """SELECT q.fact_id, q.bank_id, f.content, f.tags, f.questions, f.status
           FROM vector_queue q JOIN facts f ON f.id = q.fact_id
           WHERE q.fact_id = ANY($1::bigint[]) AND q.claimed_by = $2
           ORDER BY q.attempts, q.queued_at, q.fact_id"""
_RELEASE = """UPDATE vector_queue SET claimed_by = NULL, claimed_until = NULL,
                  attempts = attempts + $3
              WHERE fact_id = ANY($1::bigint[]) AND claimed_by = $2"""


def _passages(row: asyncpg.Record) -> list[str]:
    return [lexicon.indexed_text(row["content"], list(row["tags"])), *row["questions"]]


async def drain_once(pool: asyncpg.Pool, model: embedding.Embedder, batch: int = BATCH) -> int:
    """One bounded round; returns how many queued facts it handled (0: nothing to do)."""
    async with pool.acquire() as conn:
        claimed = [r["fact_id"] for r in await conn.fetch(
            _CLAIM, batch, MAX_ATTEMPTS, WORKER, LEASE_S)]
        if not claimed:
            return 0
        # Claimed by this worker: summed over every worker, each queued fact counts once
        # (the compose scale test checks exactly that across two worker copies).
        VECTOR_QUEUE.labels(result="claimed").inc(len(claimed))
        try:
            return await _round(conn, claimed, model)
        finally:
            # What this round did not store goes back at once (a cancelled or failed round
            # included), rather than waiting LEASE_S for the claim to expire.
            release = asyncio.ensure_future(conn.execute(_RELEASE, claimed, WORKER, 0))
            try:
                await asyncio.shield(release)
            except asyncio.CancelledError:
                await release
                raise


async def _round(conn: asyncpg.Connection, claimed: list[int], model: embedding.Embedder) -> int:
    rows = await conn.fetch(_TAKE, claimed, WORKER)
    if not rows:
        return 0
    live = [r for r in rows if r["status"] != "deleted"]
    texts = [t for r in live for t in _passages(r)]
    try:
        got, new = await embedding.passages_unstored(conn, model, texts)
    except Exception:
        log.exception("vector queue: embedding %d facts failed", len(rows))
        await conn.execute(_RELEASE, [r["fact_id"] for r in rows], WORKER, 1)
        VECTOR_QUEUE.labels(result="failed").inc(len(rows))
        return len(rows)
    embedded: dict[int, tuple[list[str], list]] = {}
    at = 0
    for r in live:
        texts_r = _passages(r)
        embedded[r["fact_id"]] = (texts_r, got[at : at + len(texts_r)])
        at += len(texts_r)
    by_bank: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        by_bank[r["bank_id"]].append(r["fact_id"])
    for bank_id, ids in by_bank.items():
        await _store(conn, bank_id, ids, embedded, new, model)
    return len(rows)


async def _store(
    conn: asyncpg.Connection,
    bank_id: int,
    ids: list[int],
    embedded: dict[int, tuple[list[str], list]],
    new: dict,
    model: embedding.Embedder,
) -> None:
    async with ceremony.index(conn, bank_id):
        # A fact a writer holds right now is left for the next round (SKIP LOCKED: the worker
        # never waits on a writer); a purged one took its queue row with it.
        now = await conn.fetch(
            "SELECT id, content, tags, questions, status FROM facts "
            "WHERE id = ANY($1::bigint[]) FOR UPDATE SKIP LOCKED",
            ids,
        )
        taken = {
            r["fact_id"]
            for r in await conn.fetch(
                "DELETE FROM vector_queue WHERE fact_id = ANY($1::bigint[]) RETURNING fact_id",
                [r["id"] for r in now],
            )
        }
        fill, changed, gone = [], [], 0
        for r in now:
            if r["id"] not in taken:  # another worker filled it meanwhile
                continue
            if r["status"] == "deleted" or r["id"] not in embedded:
                gone += 1
            elif _passages(r) != embedded[r["id"]][0]:
                changed.append(r["id"])
            else:
                fill.append(r)
        if changed:  # back in the queue: the next round embeds the text as it stands
            await conn.execute(
                "INSERT INTO vector_queue (fact_id, bank_id) SELECT unnest($1::bigint[]), $2",
                changed,
                bank_id,
            )
        if fill:
            ids_f = [r["id"] for r in fill]
            await conn.execute(
                "UPDATE facts SET embedding_model = $2 WHERE id = ANY($1::bigint[])",
                ids_f,
                model.name,
            )
            await conn.execute("DELETE FROM fact_vectors WHERE fact_id = ANY($1::bigint[])", ids_f)
            await conn.copy_records_to_table(
                "fact_vectors",
                columns=["fact_id", "bank_id", "ord", "lang", "embedding"],
                records=[
                    (r["id"], bank_id, n, language(text), vec)
                    for r in fill
                    for n, (text, vec) in enumerate(
                        zip([r["content"], *r["questions"]], embedded[r["id"]][1], strict=True)
                    )
                ],
            )
            await embedding.remember(conn, model, new)
    VECTOR_QUEUE.labels(result="embedded").inc(len(fill))
    VECTOR_QUEUE.labels(result="skipped").inc(gone)


def deferring(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Marks an import (`retain.import_many`) as running in this process while it runs."""

    @functools.wraps(fn)
    async def running(*args: P.args, **kwargs: P.kwargs) -> T:
        global _imports, _import_seen
        _imports += 1
        try:
            return await fn(*args, **kwargs)
        finally:
            _imports -= 1
            _import_seen = time.monotonic()

    return running


def defer(now: float, deferred_since: float | None) -> float:
    """How long the worker waits from this moment (0: not at all): an import is running, or
    ended less than QUIET_S ago, and it has not yet waited MAX_DEFER_S for imports in a row."""
    limit = MAX_DEFER_S - (now - deferred_since) if deferred_since is not None else MAX_DEFER_S
    if limit <= 0:
        return 0.0
    if _imports:
        return min(QUIET_S, limit)
    return max(0.0, min(_import_seen + QUIET_S - now, limit))


async def run(
    pool: asyncpg.Pool, model: embedding.Embedder, batch: int = BATCH, idle: float = IDLE_S
) -> None:
    """Drain the queue for as long as the service runs (cancelled at shutdown: a round cut
    short commits nothing, its facts stay queued). A start retries what earlier rounds gave
    up on: the operator may have fixed the embedder since."""
    async with pool.acquire() as conn:
        await conn.execute("UPDATE vector_queue SET attempts = 0 WHERE attempts > 0")
    deferred_since: float | None = None
    while True:
        now = time.monotonic()
        if wait := defer(now, deferred_since):
            deferred_since = deferred_since or now
            await asyncio.sleep(wait)
            continue
        deferred_since = None
        try:
            n = await drain_once(pool, model, batch)
        except asyncio.CancelledError:
            raise
        except Exception:  # a round that fails is retried; the worker itself never dies
            log.exception("vector queue round failed")
            n = 0
        if n == 0:
            await asyncio.sleep(idle)


def start(rt) -> None:
    """Service start hook (`create_app(on_start=...)`): the worker that drains the queue, one
    per process, when the service has an embedder and FACTBANK_VECTOR_BATCH > 0. Ingest runs
    it unless FACTBANK_VECTOR_BATCH=0; `factbank serve worker` runs it alone (apart from the
    API, on this machine or another one pointed at the same database)."""
    if rt.model.embedder is not None and rt.settings.vector_batch > 0:
        rt.vector_worker = asyncio.create_task(
            run(rt.pool, rt.model.embedder, rt.settings.vector_batch), name="vector-queue"
        )


async def stop(rt) -> None:
    task = rt.vector_worker
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
