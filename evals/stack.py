"""A real factbank stack for benches and evals: Postgres (DATABASE_URL, or a throwaway embedded
cluster), both services under uvicorn on free loopback ports, and a throwaway bank with a token.

Everything the evals measure goes through HTTP to the real services, as an agent's would.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx


@dataclass
class Stack:
    ingest: str
    recall: str
    token: str
    bank: str
    dsn: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "X-Factbank-Agent": "eval"}


def timed_post(http: httpx.Client, url: str, body: dict) -> tuple[dict, float]:
    """POST `body` as JSON: the response's JSON and the wall time in ms, measured by the client
    over HTTP as an agent sees it. A non-2xx status raises."""
    t = time.perf_counter()
    r = http.post(url, json=body)
    ms = (time.perf_counter() - t) * 1000
    r.raise_for_status()
    return r.json(), ms


async def _setup(dsn: str, bank: str) -> str:
    from factbank.store import banks, db, migrations

    conn = await db.connect(dsn)
    try:
        await migrations.migrate(conn)
        await banks.create_bank(conn, bank, "personal")
        _, token = await banks.issue_token(conn, bank, "eval", "read,write,admin", "eval")
        return token
    finally:
        await conn.close()


async def _drop(dsn: str, bank: str) -> None:
    from factbank.store import db

    conn = await db.connect(dsn)
    try:
        # The bank's rows go; its audit records stay (the log is append-only).
        await conn.execute("DELETE FROM banks WHERE name = $1", bank)
    finally:
        await conn.close()


@contextmanager
def running_stack(**overrides: object) -> Iterator[Stack]:
    """Start everything; tear down the bank (and the embedded cluster) afterwards."""
    from factbank.runtime.runner import serve_in_thread
    from factbank.settings import Settings

    settings = Settings.from_env(**overrides)
    home = None
    embedded = None
    dsn = settings.database_url
    if not dsn:
        from factbank.runtime.embedded import EmbeddedPostgres

        home = Path(tempfile.mkdtemp(prefix="factbank-eval-"))
        os.chmod(home, 0o755)
        embedded = EmbeddedPostgres(home)
        dsn = embedded.start()
    bank = "eval-" + secrets.token_hex(4)
    token = asyncio.run(_setup(dsn, bank))
    try:
        with serve_in_thread(replace(settings, database_url=dsn), dsn) as urls:
            yield Stack(urls["ingest"], urls["recall"], token, bank, dsn)
    finally:
        if embedded is not None:
            embedded.stop()
            shutil.rmtree(home, ignore_errors=True)
        else:
            asyncio.run(_drop(dsn, bank))
