"""The append-only, hash-chained audit log.

Each bank has its own chain (admin actions outside any bank share the `NULL` chain): a row's
hash covers the previous row's hash in the same chain plus everything the row says, so an
edited, deleted or reordered row breaks every hash after it. Appends to one chain are
serialised with a transaction-scoped advisory lock, so two writers cannot fork it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from factbank.write import redaction

GENESIS = b"\x00" * 32
_LOCK_NAMESPACE = 0x61756474  # "audt"


@dataclass(frozen=True)
class Actor:
    """Who did something: resolved from the request's token (or `None`s for the operator CLI)."""

    bank_id: int | None = None
    member_id: int | None = None
    token_id: int | None = None
    agent: str = ""


OPERATOR = Actor()


def _body(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a record's hash covers (with the previous hash): everything but id and hashes."""
    detail = row["detail"]
    return {
        "at": row["at"].astimezone(UTC).isoformat(),
        "bank_id": row["bank_id"],
        "member_id": row["member_id"],
        "token_id": row["token_id"],
        "action": row["action"],
        "target": row["target"],
        "detail": json.loads(detail) if isinstance(detail, str) else detail,
    }


def _canonical(row: Mapping[str, Any]) -> bytes:
    text = json.dumps(_body(row), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode()


def chain_hash(prev_hash: bytes, row: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(prev_hash + _canonical(row)).digest()


async def _chain_head(conn: asyncpg.Connection, bank: int | None) -> bytes:
    """Lock the bank's chain for this transaction and return the hash its next record chains
    to. The bank row first, then the chain's lock, as every writer takes them
    (facts.lock_bank), so a writer and an audit append never wait on each other in a cycle."""
    if bank is not None:
        await conn.execute("SELECT 1 FROM banks WHERE id = $1 FOR NO KEY UPDATE", bank)
    await conn.execute(
        "SELECT pg_advisory_xact_lock($1, $2)", _LOCK_NAMESPACE, (bank or 0) & 0x7FFFFFFF
    )
    prev = await conn.fetchval(
        "SELECT hash FROM audit_log WHERE bank_id IS NOT DISTINCT FROM $1 ORDER BY id DESC LIMIT 1",
        bank,
    )
    return prev or GENESIS


def _record(actor: Actor, bank: int | None, action: str, target: str, detail: Any) -> dict:
    """The fields a record's hash covers (`chain_hash`), stamped now."""
    return {
        "at": datetime.now(UTC),
        "bank_id": bank,
        "member_id": actor.member_id,
        "token_id": actor.token_id,
        "action": action,
        "target": target,
        "detail": detail,
    }


async def append(
    conn: asyncpg.Connection,
    actor: Actor,
    action: str,
    target: str = "",
    detail: Mapping[str, Any] | None = None,
    *,
    bank_id: int | None = None,
) -> int:
    """Append one record inside the caller's transaction; returns its id.

    Target and detail are redacted first: the log is append-only and hash-chained, so a secret
    written here could never be removed (a purge keeps the log). Callers put ids, kinds and
    hashes in it; this catches whatever else comes in."""
    bank = bank_id if bank_id is not None else actor.bank_id
    target, clean_detail = await asyncio.to_thread(
        redaction.clean_value, [str(target), dict(detail or {})], "audit"
    )
    prev_hash = await _chain_head(conn, bank)
    row = _record(actor, bank, action, target, clean_detail)
    digest = chain_hash(prev_hash, row)
    return await conn.fetchval(
        """INSERT INTO audit_log (at, bank_id, member_id, token_id, action, target, detail,
                                  prev_hash, hash)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9) RETURNING id""",
        row["at"],
        bank,
        actor.member_id,
        actor.token_id,
        action,
        row["target"],
        json.dumps(row["detail"], ensure_ascii=False),
        prev_hash,
        digest,
    )


async def append_many(
    conn: asyncpg.Connection,
    actor: Actor,
    records: Sequence[tuple[str, str, Mapping[str, Any]]],
) -> None:
    """Append (action, target, detail) records to the actor's bank chain in one COPY, redacted
    and chained exactly as `append` does one at a time (same lock order, same hashes: `verify`
    cannot tell them apart). An import chunk of 1,000 facts paid 3 round trips a record."""
    if not records:
        return
    bank = actor.bank_id
    cleaned = await asyncio.to_thread(
        redaction.clean_value, [[str(t), dict(d or {})] for _, t, d in records], "audit"
    )
    prev_hash = await _chain_head(conn, bank)
    out = []
    for (action, _, _), (target, detail) in zip(records, cleaned, strict=True):
        row = _record(actor, bank, action, target, detail)
        digest = chain_hash(prev_hash, row)
        out.append((row["at"], bank, actor.member_id, actor.token_id, action, target,
                    json.dumps(detail, ensure_ascii=False), prev_hash, digest))
        prev_hash = digest
    # COPY assigns ids in row order, which is the chain's order.
    await conn.copy_records_to_table(
        "audit_log",
        columns=["at", "bank_id", "member_id", "token_id", "action", "target", "detail",
                 "prev_hash", "hash"],
        records=out,
    )


@dataclass(frozen=True)
class Problem:
    audit_id: int
    bank_id: int | None
    what: str


async def rows(conn: asyncpg.Connection, bank_id: int | None = None) -> AsyncIterator[dict]:
    """Audit rows in chain order (all banks, or one bank)."""
    query = "SELECT * FROM audit_log"
    args: list[Any] = []
    if bank_id is not None:
        query += " WHERE bank_id = $1"
        args.append(bank_id)
    query += " ORDER BY bank_id NULLS FIRST, id"
    async with conn.transaction(readonly=True, isolation="repeatable_read"):
        async for record in conn.cursor(query, *args):
            yield dict(record)


async def count(conn: asyncpg.Connection, bank_id: int | None = None) -> int:
    """How many audit rows there are (all banks, or one bank)."""
    return await conn.fetchval(
        "SELECT count(*) FROM audit_log WHERE $1::bigint IS NULL OR bank_id = $1", bank_id
    )


async def verify(conn: asyncpg.Connection, bank_id: int | None = None) -> list[Problem]:
    """Walk every chain; report each row whose links or hash do not hold."""
    problems: list[Problem] = []
    last: dict[int | None, bytes] = {}
    async for row in rows(conn, bank_id):
        chain = row["bank_id"]
        expected_prev = last.get(chain, GENESIS)
        if bytes(row["prev_hash"]) != expected_prev:
            problems.append(Problem(row["id"], chain, "broken link: a row before it was removed, "
                                    "inserted or reordered"))
        if chain_hash(bytes(row["prev_hash"]), row) != bytes(row["hash"]):
            problems.append(Problem(row["id"], chain, "hash mismatch: the row was edited"))
        last[chain] = bytes(row["hash"])
    return problems


def export_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        **_body(row),
        "prev_hash": bytes(row["prev_hash"]).hex(),
        "hash": bytes(row["hash"]).hex(),
    }
