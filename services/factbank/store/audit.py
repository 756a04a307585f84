"""The append-only, keyed, hash-chained audit log.

Each bank has its own chain (admin actions outside any bank share the `NULL` chain): a row's
hash covers the previous row's hash in the same chain plus everything the row says, so an
edited, deleted or reordered row breaks every hash after it. Appends to one chain are
serialised with a transaction-scoped advisory lock, so two writers cannot fork it.

Against someone with database access (as the table owner, `TRUNCATE`, deleting
the newest row with triggers disabled, or deleting a middle row and recomputing the sha256
chain all verified ok), three more things:

- The hash is HMAC-SHA256 under a key that is not in the database (`Settings.audit_key`, or
  the key file beside FACTBANK_HOME, generated on first start): without it no row can be
  re-hashed. Rows written before migration 0011 stay plain sha256, up to `keyed_from`.
- Each chain's head (its newest id and hash) is kept outside the database too (`Heads`, a
  JSON file; also answered to writers as `X-Factbank-Audit-Head` and written into exports and
  backups). A head advances only when the row it named is still there, so a deleted newest
  row, or a truncated log, leaves a head that `verify` cannot find.
- A TRUNCATE trigger refuses the statement outright (migration 0011).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from factbank.redact import redaction
from factbank.settings import Settings

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


# --- the key --------------------------------------------------------------------------------

_key: bytes | None = None


def key_of(settings: Settings) -> bytes:
    """The chain's key: `audit_key` (64 hex digits, or text of 32+ characters), else the key
    file, created with 32 random bytes (mode 600, exclusively: two services starting at once
    agree on the first one written) when it does not exist yet."""
    raw = settings.audit_key.strip()
    if raw:
        try:
            key = bytes.fromhex(raw) if len(raw) == 64 else raw.encode()
        except ValueError:
            key = raw.encode()
        if len(key) < 32:
            raise ValueError("FACTBANK_AUDIT_KEY must be 64 hex digits or 32+ characters")
        return key
    path = settings.audit_key_path
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
    text = path.read_text().strip()
    if len(text) != 64:
        raise ValueError(f"{path} must hold the audit key as 64 hex digits")
    return bytes.fromhex(text)


def configure(settings: Settings) -> None:
    """Use this server's key in this process (services at start, `factbank admin`)."""
    global _key
    _key = key_of(settings)


def _the_key() -> bytes:
    if _key is None:
        configure(Settings())  # FACTBANK_AUDIT_KEY, else the default home's key file
    assert _key is not None
    return _key


def chain_hash(prev_hash: bytes, row: Mapping[str, Any], *, keyed: bool = True) -> bytes:
    """A row's hash: HMAC-SHA256 under the key (`keyed=False`: plain sha256, the rows
    written before migration 0011)."""
    if not keyed:
        return hashlib.sha256(prev_hash + _canonical(row)).digest()
    return hmac.new(_the_key(), prev_hash + _canonical(row), hashlib.sha256).digest()


async def keyed_from(conn: asyncpg.Connection) -> int | None:
    """The first id of the keyed chain (migration 0011; None if its row was removed)."""
    return await conn.fetchval("SELECT keyed_from FROM audit_keyed")


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


async def verify(
    conn: asyncpg.Connection, bank_id: int | None = None, head: Mapping[str, Any] | None = None
) -> list[Problem]:
    """Walk every chain; report each row whose links or hash do not hold, and, given `head`
    (this database's entry of the head file, `Heads.entry`), each chain head recorded outside
    the database that the log no longer holds (rows deleted at the end, or the log truncated)
    and each break a writer already found."""
    problems: list[Problem] = []
    last: dict[int | None, bytes] = {}
    start = await keyed_from(conn)
    if start is None:  # its one row deleted behind the trigger's back
        problems.append(Problem(0, bank_id, "audit_keyed has no row: where the keyed chain "
                                "starts was removed from the database"))
        start = int((head or {}).get("keyed_from") or 1)
    if head and head.get("keyed_from") not in (None, start):
        problems.append(Problem(0, bank_id, f"keyed_from is {start} in the database but "
                                f"{head['keyed_from']} outside it: rows were passed off as old"))
        start = min(start, int(head["keyed_from"]))
    by_id: dict[int, bytes] = {}
    wanted = {int(h["id"]) for h in (head or {}).get("chains", {}).values()}
    async for row in rows(conn, bank_id):
        chain = row["bank_id"]
        expected_prev = last.get(chain, GENESIS)
        if bytes(row["prev_hash"]) != expected_prev:
            problems.append(Problem(row["id"], chain, "broken link: a row before it was removed, "
                                    "inserted or reordered"))
        keyed = row["id"] >= start
        if chain_hash(bytes(row["prev_hash"]), row, keyed=keyed) != bytes(row["hash"]):
            problems.append(Problem(row["id"], chain, "hash mismatch: the row was edited"
                                    + ("" if keyed else " (or re-hashed)")))
        last[chain] = bytes(row["hash"])
        if row["id"] in wanted:
            by_id[row["id"]] = bytes(row["hash"])
    for name, h in sorted((head or {}).get("chains", {}).items()):
        chain = None if name == "-" else int(name)
        if bank_id is not None and chain != bank_id:
            continue
        if by_id.get(int(h["id"])) != bytes.fromhex(h["hash"]):
            problems.append(Problem(int(h["id"]), chain, (
                f"the chain's head recorded outside the database (row {h['id']}, "
                f"{h.get('at', '?')}) is not in the log: rows were deleted from its end or "
                "the log was truncated")))
    for b in (head or {}).get("broken", []):
        chain = None if b["chain"] == "-" else int(b["chain"])
        if bank_id is None or chain == bank_id:
            problems.append(Problem(int(b["id"]), chain, f"found by a writer at {b['seen']}: "
                                    f"{b['what']}"))
    return problems


# --- heads outside the database ------------------------------------------------------------


def _chain_name(bank_id: int | None) -> str:
    return "-" if bank_id is None else str(bank_id)


class Heads:
    """The chains' heads, kept in a JSON file outside the database (`Settings.audit_head_path`):
    per database (its system identifier and name, so one file serves every database of a
    machine, test databases included) the keyed chain's first id and each chain's newest
    (id, hash), plus every break a writer found.

    `seal` moves a chain's head to its newest row, after the writer's commit, ONLY if the
    row the head named is still in the log with the same hash; otherwise it records the break
    and keeps the old head, so a row deleted from the end stays missing for `verify` however
    many rows are written after it. Writers (processes and coroutines) update the file under
    an exclusive lock, each change compared against what it read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = asyncio.Lock()
        # (database, keyed_from), read once: one app, one database.
        self._db: tuple[str, int | None] | None = None

    def load(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"databases": {}}

    @staticmethod
    async def database(conn: asyncpg.Connection) -> str:
        return await conn.fetchval(
            "SELECT system_identifier::text || '/' || current_database() FROM pg_control_system()"
        )

    async def entry(self, conn: asyncpg.Connection) -> dict | None:
        """This database's heads (None: nothing sealed for it yet)."""
        db = await self.database(conn)
        return (await asyncio.to_thread(self.load)).get("databases", {}).get(db)

    async def seal(
        self, conn: asyncpg.Connection, bank_ids: Sequence[int] | None = None
    ) -> dict[str, dict]:
        """Advance the heads of the given chains (None: every chain) to their newest rows;
        returns the heads now recorded for them."""
        async with self._lock:
            if self._db is None:
                self._db = (await self.database(conn), await keyed_from(conn))
            db, start = self._db
            tails = await _tails(conn, bank_ids)
            before = (self.load().get("databases", {}).get(db) or {}).get("chains", {})
            names = (
                [_chain_name(b) for b in bank_ids] if bank_ids is not None
                else sorted(set(tails) | set(before))
            )
            checked: dict[str, tuple[dict | None, dict | None, str]] = {}
            for name in names:
                old, tail = before.get(name), tails.get(name)
                checked[name] = (old, *await _advance(conn, name, old, tail))
            return await asyncio.to_thread(self._write, db, start, checked)

    def _write(
        self,
        db: str,
        start: int | None,
        checked: Mapping[str, tuple[dict | None, dict | None, str]],
    ) -> dict[str, dict]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.path.with_name(self.path.name + ".lock"),
                       os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.load()
            changed = db not in data.setdefault("databases", {})  # its first seal
            entry = data["databases"].setdefault(db, {})
            if start is not None:
                entry.setdefault("keyed_from", start)
            chains = entry.setdefault("chains", {})
            now = datetime.now(UTC).isoformat()
            for name, (old, new, what) in checked.items():
                if chains.get(name) != old:
                    continue  # another writer moved it meanwhile: its check stands
                if what:
                    broken = entry.setdefault("broken", [])
                    at = old["id"] if old else 0
                    if not any(b["chain"] == name and b["id"] == at for b in broken):
                        broken.append({"chain": name, "id": at, "what": what, "seen": now})
                        changed = True
                elif new is not None and new != old:
                    chains[name] = {**new, "at": now}
                    changed = True
            if changed:
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f, indent=1, sort_keys=True)
                os.replace(tmp, self.path)
            return {name: chains[name] for name in checked if name in chains}
        finally:
            os.close(lock)


async def _tails(conn: asyncpg.Connection, bank_ids: Sequence[int] | None) -> dict[str, dict]:
    """Each chain's newest row (id, hash hex): one index probe per chain."""
    if bank_ids is None:
        bank_ids = [r["id"] for r in await conn.fetch("SELECT id FROM banks")]
        chains: list[int | None] = [None, *bank_ids]
    else:
        chains = list(bank_ids)
    out = {}
    for chain in chains:
        row = await conn.fetchrow(
            "SELECT id, hash FROM audit_log WHERE bank_id IS NOT DISTINCT FROM $1 "
            "ORDER BY id DESC LIMIT 1" if chain is None else
            "SELECT id, hash FROM audit_log WHERE bank_id = $1 ORDER BY id DESC LIMIT 1",
            chain,
        )
        if row is not None:
            out[_chain_name(chain)] = {"id": row["id"], "hash": bytes(row["hash"]).hex()}
    return out


async def _advance(
    conn: asyncpg.Connection, name: str, old: dict | None, tail: dict | None
) -> tuple[dict | None, str]:
    """(the chain's new head, "" ) when the head may move to `tail`, or (None, what broke)."""
    if old is None:
        return tail, ""
    chain = None if name == "-" else int(name)
    found = await conn.fetchval(
        "SELECT hash FROM audit_log WHERE id = $1 AND bank_id IS NOT DISTINCT FROM $2",
        int(old["id"]), chain,
    )
    if found is None:
        return None, (f"the head row {old['id']} is gone from the log (rows deleted from the "
                      "chain's end, or the log truncated)")
    if bytes(found).hex() != old["hash"]:
        return None, f"the head row {old['id']} was changed"
    return tail, ""


def head_header(head: Mapping[str, Any] | None) -> str:
    """The `X-Factbank-Audit-Head` value: the chain's newest id and hash."""
    return f"{head['id']}:{head['hash']}" if head else ""


def export_record(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        **_body(row),
        "prev_hash": bytes(row["prev_hash"]).hex(),
        "hash": bytes(row["hash"]).hex(),
    }
