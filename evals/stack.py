"""A real factbank stack for benches and evals: Postgres (DATABASE_URL, or a throwaway embedded
cluster), both services under uvicorn on free loopback ports, and a throwaway bank with a token.

Everything the evals measure goes through HTTP to the real services, as an agent's would.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import tempfile
import threading
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _setup(dsn: str, bank: str) -> str:
    from factbank import banks, db, migrations

    conn = await db.connect(dsn)
    try:
        await migrations.migrate(conn)
        await banks.create_bank(conn, bank, "personal")
        _, token = await banks.issue_token(conn, bank, "eval", "read,write,admin", "eval")
        return token
    finally:
        await conn.close()


async def _drop(dsn: str, bank: str) -> None:
    from factbank import db

    conn = await db.connect(dsn)
    try:
        # The bank's rows go; its audit records stay (the log is append-only).
        await conn.execute("DELETE FROM banks WHERE name = $1", bank)
    finally:
        await conn.close()


def _serve(settings, dsn: str, ports: dict[str, int], stop: threading.Event) -> None:
    import uvicorn

    from factbank.runner import _app

    async def main() -> None:
        servers = [
            uvicorn.Server(
                uvicorn.Config(
                    _app(name, settings, dsn),
                    host="127.0.0.1",
                    port=port,
                    log_level="warning",
                    access_log=False,
                )
            )
            for name, port in ports.items()
        ]
        for s in servers:
            s.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        tasks = [asyncio.create_task(s.serve()) for s in servers]
        await asyncio.to_thread(stop.wait)
        for s in servers:
            s.should_exit = True
        await asyncio.gather(*tasks)

    asyncio.run(main())


@contextmanager
def running_stack(**overrides: object) -> Iterator[Stack]:
    """Start everything; tear down the bank (and the embedded cluster) afterwards."""
    from factbank.settings import Settings

    settings = Settings.from_env(**overrides)
    home = None
    embedded = None
    dsn = settings.database_url
    if not dsn:
        from factbank.embedded import EmbeddedPostgres

        home = Path(tempfile.mkdtemp(prefix="factbank-eval-"))
        os.chmod(home, 0o755)
        embedded = EmbeddedPostgres(home)
        dsn = embedded.start()
    bank = "eval-" + secrets.token_hex(4)
    token = asyncio.run(_setup(dsn, bank))
    ports = {"ingest": free_port(), "recall": free_port()}
    settings = replace(settings, database_url=dsn)
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(settings, dsn, ports, stop), daemon=True)
    thread.start()
    stack = Stack(
        f"http://127.0.0.1:{ports['ingest']}",
        f"http://127.0.0.1:{ports['recall']}",
        token,
        bank,
        dsn,
    )
    try:
        deadline = time.monotonic() + 60
        for url in (stack.ingest, stack.recall):
            while True:
                try:
                    if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or not thread.is_alive():
                    raise RuntimeError("the services did not start")
                time.sleep(0.2)
        yield stack
    finally:
        stop.set()
        thread.join(timeout=30)
        if embedded is not None:
            embedded.stop()
            shutil.rmtree(home, ignore_errors=True)
        else:
            asyncio.run(_drop(dsn, bank))
