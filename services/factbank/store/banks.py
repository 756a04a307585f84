"""Banks, members and tokens: who may read or write which bank.

A token is scoped to exactly one bank and one member, carries scopes (read, write, admin), is
shown once and stored only as its SHA-256. Authentication reads the token row on every request,
so a revoked token stops working at once (no auth cache to expire).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from factbank.errors import Conflict, NotFound
from factbank.redact import redaction
from factbank.store import audit
from factbank.store.audit import Actor

SCOPES = ("read", "write", "admin")
TOKEN_PREFIX = "fb_"


@dataclass(frozen=True)
class Principal:
    """The caller behind a request: one bank, one member, one token, its scopes."""

    bank_id: int
    bank_name: str
    bank_kind: str
    member_id: int
    member_name: str
    token_id: int
    scopes: frozenset[str]
    agent: str = ""
    # The harness's session id (X-Factbank-Session), "" outside a session: miss counting
    # (factbank.write.misses) records which session wrote and was shown what.
    session: str = ""
    # The bank's redaction policy (`redact` or `reject`), read with the token: every step of
    # the request that applies it reads it here, never from the database again.
    redaction_policy: str = "redact"

    def can(self, scope: str) -> bool:
        return scope in self.scopes

    def actor(self) -> Actor:
        return Actor(self.bank_id, self.member_id, self.token_id, self.agent)


@dataclass(frozen=True)
class Bank:
    id: int
    name: str
    kind: str
    redaction_policy: str
    created_at: datetime


@dataclass(frozen=True)
class TokenInfo:
    id: int
    bank: str
    member: str
    prefix: str
    scopes: tuple[str, ...]
    label: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def parse_scopes(raw: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    scopes = tuple(dict.fromkeys(s.strip() for s in items if s.strip()))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ValueError(f"scopes must be a non-empty subset of {', '.join(SCOPES)}; got {raw!r}")
    return scopes


def _bank(row: asyncpg.Record) -> Bank:
    return Bank(row["id"], row["name"], row["kind"], row["redaction_policy"], row["created_at"])


async def create_bank(
    conn: asyncpg.Connection, name: str, kind: str = "personal", *, actor: Actor = audit.OPERATOR
) -> Bank:
    """Create a bank with the default category registry, in one transaction."""
    if kind not in ("personal", "team"):
        raise ValueError("kind must be 'personal' or 'team'")
    async with conn.transaction():
        try:
            row = await conn.fetchrow(
                "INSERT INTO banks (name, kind) VALUES ($1, $2) RETURNING *", name, kind
            )
        except asyncpg.UniqueViolationError as exc:
            raise Conflict(f"bank {name!r} already exists") from exc
        except asyncpg.CheckViolationError as exc:
            raise ValueError(
                f"bad bank name {name!r}: lowercase letters, digits, '.', '_' or '-'"
            ) from exc
        await conn.execute(
            """INSERT INTO categories (bank_id, name, description, auto_inject, decays)
               SELECT $1, name, description, auto_inject, decays FROM default_categories""",
            row["id"],
        )
        await audit.append(conn, actor, "bank.create", name, {"kind": kind}, bank_id=row["id"])
    return _bank(row)


async def get_bank(conn: asyncpg.Connection, name: str) -> Bank:
    row = await conn.fetchrow("SELECT * FROM banks WHERE name = $1", name)
    if row is None:
        raise NotFound(f"no bank named {name!r}")
    return _bank(row)


async def list_banks(conn: asyncpg.Connection) -> list[Bank]:
    return [_bank(r) for r in await conn.fetch("SELECT * FROM banks ORDER BY id")]


async def set_redaction_policy(
    conn: asyncpg.Connection, bank: str, policy: str, *, actor: Actor = audit.OPERATOR
) -> None:
    if policy not in ("redact", "reject"):
        raise ValueError("policy must be 'redact' or 'reject'")
    async with conn.transaction():
        b = await get_bank(conn, bank)
        await conn.execute("UPDATE banks SET redaction_policy = $2 WHERE id = $1", b.id, policy)
        await audit.append(conn, actor, "bank.policy", bank, {"policy": policy}, bank_id=b.id)


async def add_member(
    conn: asyncpg.Connection, bank: str, member: str, *, actor: Actor = audit.OPERATOR
) -> int:
    if redaction.clean_text("member", member) != member:
        raise ValueError("bad member name: it looks like a secret (a name is shown to everyone)")
    async with conn.transaction():
        b = await get_bank(conn, bank)
        try:
            member_id = await conn.fetchval(
                "INSERT INTO members (bank_id, name) VALUES ($1, $2) RETURNING id", b.id, member
            )
        except asyncpg.UniqueViolationError as exc:
            raise Conflict(f"member {member!r} already exists in bank {bank!r}") from exc
        except asyncpg.CheckViolationError as exc:
            raise ValueError(f"bad member name {member!r}") from exc
        await audit.append(conn, actor, "member.add", member, bank_id=b.id)
    return member_id


async def issue_token(
    conn: asyncpg.Connection,
    bank: str,
    member: str,
    scopes: str | list[str] | tuple[str, ...] = ("read", "write"),
    label: str = "",
    *,
    create_member: bool = True,
    actor: Actor = audit.OPERATOR,
) -> tuple[TokenInfo, str]:
    """Issue a token for a member (created on first use); returns (info, the token, once)."""
    wanted = parse_scopes(scopes)
    label = redaction.clean_text("label", label)
    async with conn.transaction():
        b = await get_bank(conn, bank)
        member_id = await conn.fetchval(
            "SELECT id FROM members WHERE bank_id = $1 AND name = $2", b.id, member
        )
        if member_id is None:
            if not create_member:
                raise NotFound(f"no member {member!r} in bank {bank!r}")
            member_id = await add_member(conn, bank, member, actor=actor)
        token = new_token()
        row = await conn.fetchrow(
            """INSERT INTO tokens (bank_id, member_id, prefix, token_hash, scopes, label)
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
            b.id,
            member_id,
            token[:11],
            hash_token(token),
            list(wanted),
            label,
        )
        await audit.append(
            conn, actor, "token.issue", str(row["id"]),
            {"member": member, "scopes": list(wanted), "label": label}, bank_id=b.id,
        )
    return await get_token(conn, row["id"]), token


_TOKEN_SELECT = """
SELECT t.*, b.name AS bank, m.name AS member
FROM tokens t JOIN banks b ON b.id = t.bank_id JOIN members m ON m.id = t.member_id
"""


def _token_info(row: asyncpg.Record) -> TokenInfo:
    return TokenInfo(
        row["id"], row["bank"], row["member"], row["prefix"], tuple(row["scopes"]), row["label"],
        row["created_at"], row["last_used_at"], row["revoked_at"],
    )


async def get_token(conn: asyncpg.Connection, token_id: int) -> TokenInfo:
    row = await conn.fetchrow(_TOKEN_SELECT + " WHERE t.id = $1", token_id)
    if row is None:
        raise NotFound(f"no token with id {token_id}")
    return _token_info(row)


async def list_tokens(conn: asyncpg.Connection, bank: str | None = None) -> list[TokenInfo]:
    if bank is None:
        rows = await conn.fetch(_TOKEN_SELECT + " ORDER BY t.id")
    else:
        await get_bank(conn, bank)
        rows = await conn.fetch(_TOKEN_SELECT + " WHERE b.name = $1 ORDER BY t.id", bank)
    return [_token_info(r) for r in rows]


AUDIENCE_NAMES = 10


async def audience(conn: asyncpg.Connection, principal: Principal) -> dict[str, Any]:
    """Who can read what was just written to the caller's bank (a member whose team
    token was saved as "personal" read "stored fact 6 in personal" and took it for private):
    the bank's name and kind, how many members hold a live token that reads, and up to
    AUDIENCE_NAMES of their names. Every write's answer carries it."""
    names = await conn.fetch(
        """SELECT m.name FROM members m
           WHERE m.bank_id = $1 AND EXISTS (
               SELECT 1 FROM tokens t WHERE t.member_id = m.id AND t.revoked_at IS NULL
                 AND 'read' = ANY(t.scopes))
           ORDER BY m.name""",
        principal.bank_id,
    )
    return {"bank": principal.bank_name, "kind": principal.bank_kind, "members": len(names),
            "names": [r["name"] for r in names[:AUDIENCE_NAMES]]}


async def list_members(conn: asyncpg.Connection, bank_id: int) -> list[dict]:
    """A bank's members with how many live tokens each holds and their last use."""
    rows = await conn.fetch(
        """SELECT m.id, m.name, m.created_at,
                  count(t.id) FILTER (WHERE t.revoked_at IS NULL) AS live_tokens,
                  max(t.last_used_at) AS last_used_at
           FROM members m LEFT JOIN tokens t ON t.member_id = m.id
           WHERE m.bank_id = $1 GROUP BY m.id ORDER BY m.id""",
        bank_id,
    )
    return [dict(r) for r in rows]


async def revoke_token(
    conn: asyncpg.Connection, token_id: int, *, actor: Actor = audit.OPERATOR
) -> TokenInfo:
    async with conn.transaction():
        row = await conn.fetchrow(
            "UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 "
            "RETURNING bank_id",
            token_id,
        )
        if row is None:
            raise NotFound(f"no token with id {token_id}")
        await audit.append(conn, actor, "token.revoke", str(token_id), bank_id=row["bank_id"])
    return await get_token(conn, token_id)


async def rotate_token(
    conn: asyncpg.Connection, token_id: int, *, actor: Actor = audit.OPERATOR
) -> tuple[TokenInfo, str]:
    """Revoke a token and issue its replacement (same bank, member, scopes) in one step."""
    async with conn.transaction():
        old = await get_token(conn, token_id)
        if old.revoked_at is not None:
            raise Conflict(f"token {token_id} is already revoked")
        info, token = await issue_token(
            conn, old.bank, old.member, old.scopes, old.label, create_member=False, actor=actor
        )
        await conn.execute(
            "UPDATE tokens SET revoked_at = now(), rotated_to = $2 WHERE id = $1", token_id, info.id
        )
        bank_id = await conn.fetchval("SELECT bank_id FROM tokens WHERE id = $1", token_id)
        await audit.append(
            conn, actor, "token.rotate", str(token_id), {"new_token": info.id}, bank_id=bank_id
        )
    return info, token


async def authenticate(conn: asyncpg.Connection, token: str, agent: str = "") -> Principal | None:
    """Resolve a bearer token; `None` for unknown or revoked. Records last use (per minute)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    row = await conn.fetchrow(
        """SELECT t.id, t.scopes, t.bank_id, b.name AS bank, b.kind, t.member_id, m.name AS member,
                  b.redaction_policy,
                  t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute' AS stale
           FROM tokens t JOIN banks b ON b.id = t.bank_id JOIN members m ON m.id = t.member_id
           WHERE t.token_hash = $1 AND t.revoked_at IS NULL""",
        hash_token(token),
    )
    if row is None:
        return None
    if row["stale"]:
        await conn.execute("UPDATE tokens SET last_used_at = now() WHERE id = $1", row["id"])
    return Principal(
        bank_id=row["bank_id"],
        bank_name=row["bank"],
        bank_kind=row["kind"],
        member_id=row["member_id"],
        member_name=row["member"],
        token_id=row["id"],
        scopes=frozenset(row["scopes"]),
        agent=agent[:64],
        redaction_policy=row["redaction_policy"],
    )
