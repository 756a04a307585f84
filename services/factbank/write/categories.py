"""A bank's category registry: names facts are filed under, and which are auto-injected."""

from __future__ import annotations

import asyncio

import asyncpg

from factbank.errors import Conflict, Refused
from factbank.redact import redaction
from factbank.store import ceremony
from factbank.store.banks import Principal


async def list_all(conn: asyncpg.Connection, bank_id: int) -> list[dict]:
    rows = await conn.fetch(
        """SELECT c.name, c.description, c.auto_inject, c.decays,
                  count(f.id) FILTER (WHERE f.status <> 'deleted') AS facts
           FROM categories c LEFT JOIN facts f ON f.bank_id = c.bank_id AND f.category = c.name
           WHERE c.bank_id = $1 GROUP BY c.bank_id, c.name ORDER BY c.name""",
        bank_id,
    )
    return [dict(r) for r in rows]


async def add(
    pool: asyncpg.Pool,
    principal: Principal,
    name: str,
    description: str,
    auto_inject: bool,
    decays: bool,
) -> dict:
    policy = principal.redaction_policy
    # A description is shown to every member and agent: redacted (or refused under the reject
    # policy) like a fact. A name holding a secret no longer fits the name rule: refused.
    clean = await asyncio.to_thread(
        redaction.clean_fields, {"name": name, "description": description[:300]}, policy
    )
    name, description = str(clean["name"]), str(clean["description"])
    async with ceremony.write(pool, principal) as w:
        try:
            await w.conn.execute(
                "INSERT INTO categories (bank_id, name, description, auto_inject, decays) "
                "VALUES ($1, $2, $3, $4, $5)",
                principal.bank_id,
                name,
                description,
                auto_inject,
                decays,
            )
        except asyncpg.UniqueViolationError as exc:
            raise Conflict(f"category {name!r} already exists") from exc
        except asyncpg.CheckViolationError as exc:
            raise Refused.one(
                "name",
                "a category name is lowercase letters, digits, '-' or '_', starting with a "
                "letter, at most 40",
            ) from exc
        await w.audit("category.add", name)
    return {"name": name, "description": description, "auto_inject": auto_inject, "decays": decays}
