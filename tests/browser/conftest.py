"""Browser tests of the dashboard: Playwright for Python driving Debian's chromium (browser
downloads are unavailable, so the system binary is launched by `executable_path`). Without
chromium or playwright the tests skip, saying which is missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from tests.browser.stack import Live, live_stack
from tests.conftest import with_database
from tests.integration.conftest import make_bank

CHROMIUM = os.environ.get("FACTBANK_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
async def browser_tokens(pg_server: str, template_dsn: str) -> dict:
    name = f"factbank_browser_{os.getpid()}"
    admin = await asyncpg.connect(pg_server)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        template = urlsplit(template_dsn).path.lstrip("/")
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    finally:
        await admin.close()
    dsn = with_database(pg_server, name)
    conn = await asyncpg.connect(dsn)
    try:
        personal = await make_bank(conn, "alice")
        team = await make_bank(conn, "acme", "team")
    finally:
        await conn.close()
    return {"dsn": dsn, "personal": personal.admin, "team": team.rw, "team_ro": team.ro}


@pytest.fixture(scope="session")
def live(browser_tokens, tmp_path_factory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("dash")
    with live_stack(browser_tokens["dsn"], home, tokens={
            "personal": browser_tokens["personal"], "team": browser_tokens["team"]}) as running:
        yield running


@pytest.fixture(scope="module")
def browser(live):
    """Chromium for a test module. After `live`: Playwright's sync API runs an event loop in
    this thread, and pytest-asyncio could not set up an async fixture after it started. Module
    scope, not session: while Playwright runs, that loop is the thread's running loop, and in
    the whole suite every later async test failed with "Runner.run() cannot be called from a
    running event loop" (302 errors); stopped at the end of each module, the loop is gone."""
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install 'factbank[test]')")
    pw = sync_playwright().start()
    b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    yield b
    b.close()
    pw.stop()


class Console:
    """Every console error and uncaught page error of a page, asserted empty at the end."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))


@pytest.fixture
def page(browser, live):
    """A signed-in page (the launch URL was opened) at 1280 px; no console errors allowed."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    console = Console(p)
    p.console = console  # a test that asks for a 404 on purpose clears what it caused
    p.goto(live.launch())
    yield p
    # 403s the tests provoke on purpose (a refused fetch) are answers, not script errors;
    # anything else logged is a bug.
    errors = [e for e in console.errors if "status of 403" not in e]
    context.close()
    assert not errors, errors
