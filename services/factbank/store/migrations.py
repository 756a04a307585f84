"""Apply the numbered SQL files in `migrations/`, in order, each in its own transaction.

Applied versions are recorded in `schema_migrations` with a checksum, so running twice is a
no-op and an edited, already-applied file is refused rather than silently ignored. A session
advisory lock makes two processes migrating at once take turns instead of racing.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

ADVISORY_LOCK_KEY = 0x66616374  # "fact"
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class SchemaError(RuntimeError):
    """The database schema does not match the code (behind, or edited after applying)."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available() -> list[Migration]:
    """The migration files shipped with this version of factbank, in order."""
    found = []
    for entry in resources.files("factbank_migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise SchemaError(f"two migration files share a number: {versions}")
    return found


async def _applied(conn: asyncpg.Connection) -> dict[int, str]:
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return {}
    rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
    return {r["version"]: r["checksum"] for r in rows}


def _check_checksums(applied: dict[int, str], files: list[Migration]) -> None:
    for m in files:
        if m.version in applied and applied[m.version] != m.checksum:
            raise SchemaError(
                f"migration {m.name} was edited after it was applied; add a new migration instead"
            )


async def pending(conn: asyncpg.Connection) -> list[Migration]:
    files = available()
    applied = await _applied(conn)
    _check_checksums(applied, files)
    return [m for m in files if m.version not in applied]


async def migrate(conn: asyncpg.Connection) -> list[Migration]:
    """Apply what is pending; returns what this call applied (empty when up to date)."""
    await conn.execute("SELECT pg_advisory_lock($1)", ADVISORY_LOCK_KEY)
    try:
        await conn.execute(_CREATE_TABLE)
        done = []
        for m in await pending(conn):
            async with conn.transaction():
                await conn.execute(m.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    m.version,
                    m.name,
                    m.checksum,
                )
            done.append(m)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", ADVISORY_LOCK_KEY)


async def require_current(conn: asyncpg.Connection) -> None:
    """Refuse to serve on a schema that is behind the code."""
    behind = await pending(conn)
    if behind:
        names = ", ".join(m.name for m in behind)
        raise SchemaError(
            f"database schema is behind ({len(behind)} pending: {names}); "
            "run `factbank migrate` first"
        )
