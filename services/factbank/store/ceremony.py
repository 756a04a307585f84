"""The write ceremony: every change to a bank's facts or registry is one transaction that takes
the bank row first, records what happened (fact events, audit rows) and bumps the bank's
version once, at the end.

    async with ceremony.write(pool, principal) as w:
        ...                                  # the change itself, on w.conn
        await w.event(fact_id, "confirmed", before=t0, after=t1, reason=why)
        await w.audit("fact.confirm", str(fact_id), {"before": t0, "after": t1})
        return await w.fact(fact_id)         # the fact as this transaction left it

A bulk import records a chunk's history and audit rows in one go (`w.events`, `w.audits`):
the same doors, redaction and chain, one COPY each instead of a round trip a row.

Written out by hand it was seven copies (lifecycle, retain, categories) of "lock the bank,
change, record the event, append the audit row, bump the version, re-read the fact", and the
order is not free: the bank row must be the first lock a writer takes (`facts.lock_bank`, the
load drill's deadlock), and the version must move in the same transaction as the change, or a
recall cache keyed on it serves the old answer. A transaction that records nothing (an import
whose facts are all present) leaves the version alone, so caches stay valid.

Redaction has one door per table and the ceremony only goes through them: `facts.record_event`
(reason, agent) and `audit.append` (target, detail) redact every string they store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg

from factbank.models import Fact
from factbank.store import audit, facts
from factbank.store.banks import Principal


@dataclass
class Write:
    """One write transaction of one principal in its bank; `wrote` once anything is recorded."""

    conn: asyncpg.Connection
    principal: Principal
    wrote: bool = False

    @property
    def bank_id(self) -> int:
        return self.principal.bank_id

    async def event(
        self,
        fact_id: int,
        kind: str,
        *,
        before: float | None,
        after: float | None,
        reason: str = "",
        related: int | None = None,
        agent: str | None = None,
        project: str | None = None,
        remotes: Sequence[str] = (),
    ) -> None:
        """A row of the fact's history, by this principal (`agent`: the fact's own writer;
        `project`, `remotes`: where a confirm was made, read by the rule gate)."""
        await facts.record_event(
            self.conn,
            fact_id,
            self.bank_id,
            kind,
            before=before,
            after=after,
            member_id=self.principal.member_id,
            agent=self.principal.agent if agent is None else agent,
            reason=reason,
            related=related,
            project=project,
            remotes=remotes,
        )
        self.wrote = True

    async def audit(
        self, action: str, target: str = "", detail: Mapping[str, Any] | None = None
    ) -> None:
        """One audit row in the bank's chain, by this principal's token."""
        await audit.append(self.conn, self.principal.actor(), action, target, detail)
        self.wrote = True

    async def events(self, rows: Sequence[facts.Event]) -> None:
        """Many rows of history at once (a bulk import): the same door, redacted the same."""
        if rows:
            await facts.record_events(self.conn, self.bank_id, rows)
            self.wrote = True

    async def audits(self, records: Sequence[tuple[str, str, Mapping[str, Any]]]) -> None:
        """Many audit rows at once, (action, target, detail), chained as `audit` chains one."""
        if records:
            await audit.append_many(self.conn, self.principal.actor(), records)
            self.wrote = True

    async def fact(self, fact_id: int) -> Fact:
        return await facts.get_fact(self.conn, self.bank_id, fact_id)


@asynccontextmanager
async def begin(conn: asyncpg.Connection, principal: Principal) -> AsyncIterator[Write]:
    """The ceremony on a connection the caller holds (it did slow work on it first)."""
    async with conn.transaction():
        await facts.lock_bank(conn, principal.bank_id)
        w = Write(conn, principal)
        yield w
        if w.wrote:
            await facts.bump_version(conn, principal.bank_id)


@asynccontextmanager
async def write(pool: asyncpg.Pool, principal: Principal) -> AsyncIterator[Write]:
    """Acquire a connection and run the ceremony on it."""
    async with pool.acquire() as conn, begin(conn, principal) as w:
        yield w


@asynccontextmanager
async def index(conn: asyncpg.Connection, bank_id: int) -> AsyncIterator[asyncpg.Connection]:
    """A write by the service itself that adds no history, only derived data (the embedder
    worker filling queued vectors), then the bank's version bumped in a transaction of its
    own, so a recall cache built without that data is not served after it.

    It takes no bank lock while it writes: an import chunk holds the bank row for its whole
    transaction, and a worker that waited for it, then held it through its HNSW inserts, halved
    the import's commit rate (3,000 facts restored from cache: 67 facts/s against 115 cold).
    The caller locks only the fact rows it fills, with SKIP LOCKED, so it never waits on a
    writer (which takes the bank row first and may then wait for a fact row: no cycle)."""
    async with conn.transaction():
        yield conn
    async with conn.transaction():
        await facts.bump_version(conn, bank_id)
