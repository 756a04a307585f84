"""Test fixtures against the real things: Postgres+pgvector and Redis, never mocks.

Postgres comes from, in order: `DATABASE_URL` (a server where the test user may CREATE
DATABASE), a testcontainers `pgvector/pgvector` container when `FACTBANK_TEST_DOCKER=1` and a
Docker engine answers, or the embedded PostgreSQL 18 wheel started once per session. Each test
gets its own database cloned from a migrated template, so tests never see each other's rows.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from factbank.store import db, migrations

_counter = itertools.count()

# One audit key for the whole session: the fixtures write audit rows straight
# through the store, the services and `factbank admin` subprocesses write more, and every one
# must chain with the same key. Heads written by CLI subprocesses that get no FACTBANK_HOME
# go to a session folder, never to the user's data dir.
os.environ.setdefault("FACTBANK_AUDIT_KEY", "5e" * 32)
os.environ.setdefault(
    "FACTBANK_AUDIT_HEAD", str(Path(tempfile.mkdtemp(prefix="factbank-audit-")) / "head.json")
)

# --- ../shared or the project's own stand-ins ----------------------------------------------
# Hook and compose schemas of the real tools live in ../shared, outside the repository (data
# that is never copied here). A plain clone has no ../shared: then the tests validate against
# hand-written stand-ins in tests/fixtures/shared-standin (see its README), so the README's
# test command passes with nothing skipped. The module-level constants of the test modules read
# these variables, and this conftest is imported before them.
ROOT = Path(__file__).resolve().parents[1]
STANDIN_DIR = ROOT / "tests" / "fixtures" / "shared-standin"
UPSTREAM_SHARED_DIR = ROOT.parent / "shared"
if not os.environ.get("FACTBANK_SHARED_DIR") and not (
    UPSTREAM_SHARED_DIR / "hook-schemas"
).is_dir():
    os.environ["FACTBANK_SHARED_DIR"] = str(STANDIN_DIR)
if not os.environ.get("FACTBANK_COMPOSE_SCHEMA") and not (
    UPSTREAM_SHARED_DIR / "schemas" / "compose-spec.json"
).is_file():
    os.environ["FACTBANK_COMPOSE_SCHEMA"] = str(STANDIN_DIR / "schemas" / "compose-spec.json")


def pytest_report_header() -> str:
    shared = os.environ.get("FACTBANK_SHARED_DIR") or str(UPSTREAM_SHARED_DIR)
    kind = "the project's stand-ins" if Path(shared) == STANDIN_DIR else "upstream data"
    return f"factbank: hook/compose schemas from {shared} ({kind})"


# --- git ---------------------------------------------------------------------------------------
# A new user's machine (and CI under a fresh HOME) has no global git identity, and `git commit`
# then refuses ("Please tell me who you are"): a review once found every test of
# test_cli_staleness.py erroring so. Every test that runs git goes through `git`/`git_env`
# here, which name an identity in the environment (it wins over any config file), so the suite
# needs nothing from the user's ~/.gitconfig: run it with HOME=$(mktemp -d).
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "factbank tests", "GIT_AUTHOR_EMAIL": "tests@factbank.invalid",
                "GIT_COMMITTER_NAME": "factbank tests",
                "GIT_COMMITTER_EMAIL": "tests@factbank.invalid"}


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with the tests' git identity."""
    return {**(os.environ if base is None else base), **GIT_IDENTITY}


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """`git -C repo ARGS` with the tests' identity; its stdout, stripped (raises on failure)."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=git_env(env), timeout=60).stdout.strip()


def wait_until(what: str, cond: Callable[[], Any], timeout: float = 60.0,
               every: float = 0.05) -> Any:
    """`cond()`'s first truthy value, polled every `every` seconds: what a hook's detached
    child or a background run does after the call returned. Raises, naming `what`, when it
    has not come within `timeout` seconds (generous: the box may be at load 20)."""
    end = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(every)


@pytest.fixture
def git_identity(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The tests' git identity in this process's environment, for a test whose code under
    test commits in-process (`factbank rules propose --branch` runs `git commit-tree`)."""
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    return GIT_IDENTITY


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


@contextlib.asynccontextmanager
async def database_before(pg_server: str, name: str, version: int) -> AsyncIterator[str]:
    """A database of its own with the migrations below `version` applied and recorded, as a
    deployment that has not yet run `version` has it; dropped afterwards. For upgrade tests."""
    admin = await asyncpg.connect(pg_server)
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    await admin.close()
    dsn = with_database(pg_server, name)
    c = await asyncpg.connect(dsn)
    try:
        await c.execute(migrations._CREATE_TABLE)
        for m in migrations.available():
            if m.version >= version:
                break
            await c.execute(m.sql)
            await c.execute("INSERT INTO schema_migrations (version, name, checksum) "
                            "VALUES ($1, $2, $3)", m.version, m.name, m.checksum)
    finally:
        await c.close()
    try:
        yield dsn
    finally:
        admin = await asyncpg.connect(pg_server)
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


def _docker_pg() -> Iterator[str]:
    from testcontainers.postgres import PostgresContainer

    with PostgresContainer("pgvector/pgvector:pg17", driver=None) as pg:
        yield pg.get_connection_url()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A DSN of a Postgres server with pgvector, for the whole session."""
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    if os.environ.get("FACTBANK_TEST_DOCKER") == "1":
        yield from _docker_pg()
        return
    from factbank.runtime.embedded import EmbeddedPostgres

    home = Path(tempfile.mkdtemp(prefix="factbank-test-"))
    os.chmod(home, 0o755)
    pg = EmbeddedPostgres(home)
    dsn = pg.start()
    try:
        yield dsn
    finally:
        pg.stop()


@pytest.fixture(scope="session")
async def template_dsn(pg_server: str) -> str:
    """A migrated database that every test database is cloned from."""
    name = f"factbank_tpl_{os.getpid()}"
    admin = await asyncpg.connect(pg_server)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name}")
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    dsn = with_database(pg_server, name)
    conn = await asyncpg.connect(dsn)
    try:
        await migrations.migrate(conn)
    finally:
        await conn.close()
    return dsn


@pytest.fixture
async def dsn(pg_server: str, template_dsn: str) -> AsyncIterator[str]:
    """A fresh, migrated, empty database for one test."""
    name = f"factbank_t{os.getpid()}_{next(_counter)}"
    template = urlsplit(template_dsn).path.lstrip("/")
    admin = await asyncpg.connect(pg_server)
    try:
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    finally:
        await admin.close()
    yield with_database(pg_server, name)
    admin = await asyncpg.connect(pg_server)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


@pytest.fixture
async def conn(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(dsn)
    await db._init_connection(c)
    yield c
    await c.close()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A real Redis (REDIS_URL, else 127.0.0.1:6379 db 15); skips, saying why, without one."""
    import redis

    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except Exception as exc:
        pytest.skip(f"needs a running Redis at {url} (set REDIS_URL): {exc}")
    return url
