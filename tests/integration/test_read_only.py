"""Reading changes nothing: every `--help`, read command and dry run of the CLI,
every GET page of the dashboard and the agents' read tools (MCP), run against a bank with
facts, a supersede chain, a timeline with a conflict and an open handoff, leaves every row of
every table as it was.

Found so: `factbank inject-preview` marked the handoff delivered, so the real session start
never got it. The dump compares all tables, whole rows (`t::text`), with no column left out.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from mcp import Client as McpClient

from factbank_client import config as client_config
from factbank_client import mcp_server
from factbank_client.cli.main import build_parser, main
from factbank_client.client import Client
from tests.browser.stack import PROJECT, Live, live_stack
from tests.integration.conftest import make_bank


async def dump(dsn: str) -> dict[str, list[str]]:
    """Every row of every table of the database, as text, sorted."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = [r["t"] for r in await conn.fetch(
            "SELECT quote_ident(tablename) AS t FROM pg_tables WHERE schemaname = 'public' "
            "ORDER BY 1")]
        return {t: sorted(r["row"] for r in await conn.fetch(f"SELECT x::text AS row FROM {t} x"))
                for t in tables}
    finally:
        await conn.close()


def changed(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    out = []
    for table in sorted(set(before) | set(after)):
        old, new = set(before.get(table, [])), set(after.get(table, []))
        out += [f"{table}: - {row}" for row in sorted(old - new)]
        out += [f"{table}: + {row}" for row in sorted(new - old)]
    return out


@pytest.fixture
async def live(dsn, conn, tmp_path, monkeypatch) -> Iterator[tuple[Live, str]]:
    personal = await make_bank(conn, "alice")
    team = await make_bank(conn, "acme", "team")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = git@github.com:acme/api.git\n', "utf-8")
    (repo / "CLAUDE.md").write_text(  # for migrate-native --dry-run: one fact line, one rule
        "# api\n\n- The API listens on port 8443 behind TLS\n- Always run the tests first\n",
        "utf-8")
    for var in ("FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN", "FACTBANK_TEAM_TOKEN",
                "FACTBANK_AGENT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(repo)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with live_stack(dsn, tmp_path, tokens={"personal": personal.admin,
                                           "team": team.rw}) as running:
        cfg = tmp_path / "cfg" / "config.toml"
        client_config.save_login(running.config.url, personal.admin,
                                 recall_url=running.config.recall_url, path=cfg)
        client_config.save_login(running.config.url, team.rw, "team",
                                 recall_url=running.config.recall_url, path=cfg)
        monkeypatch.setenv("FACTBANK_CONFIG", str(cfg))
        yield running, dsn


def every_help(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple]:
    """`factbank ... --help` for the top level and every command and subcommand."""
    yield (*prefix, "--help")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from every_help(sub, (*prefix, name))


def read_commands(ids: dict[str, int], out_dir: Path) -> list[tuple[str, ...]]:
    empty = out_dir / "empty-harness-home"
    empty.mkdir()
    fid = str(ids["port"])
    return [
        ("get", fid), ("get", str(ids["team"]), "--bank", "team"), ("get", fid, "--json"),
        ("history", fid), ("history", str(ids["port_new"]), "--json"),
        ("questions", str(ids["pnpm"])),
        ("search", "which port does the API listen on"), ("search", "端口", "--json"),
        ("search", "retry backoff", "--project", PROJECT, "--mode", "lexical"),
        ("stats",), ("stats", "--json"), ("categories",), ("categories", "--bank", "team"),
        ("export",), ("export", "--bank", "team", "--out", str(out_dir / "team.jsonl")),
        ("timeline", "--all-projects"), ("timeline", "--project", PROJECT, "--json"),
        ("inject-preview", "--project", PROJECT),
        ("inject-preview", "--project", PROJECT, "--session-id", "codex-7"),
        ("inject-preview", "--project", PROJECT, "--prompt", "which port does the API use"),
        ("inject-preview", "--project", PROJECT, "--session-id", "codex-7", "--prompt",
         "fix the retry cap in src/retry.py"),
        # claude-1 is the session codex-7's edit ran into: its prompt block tells the conflict.
        ("inject-preview", "--project", PROJECT, "--session-id", "claude-1", "--prompt",
         "run the retry tests"),
        ("rules", "candidates"),
        ("import-history", "claude", "--dry-run", "--dir", str(empty)),
        ("migrate-native", "claude", "--dry-run"),
        ("dispatch", "list"),
    ]


DASHBOARD_PAGES = ["/facts", "/facts?q=which+port+does+the+API+listen+on", "/facts?bank=team",
                   "/facts?status=superseded", "/facts?tag=workers&after=30", "/timeline",
                   "/timeline?bank=team", f"/timeline?bank=team&project={PROJECT}", "/health",
                   "/admin", "/evals", "/dispatch", "/admin/personal/audit.jsonl"]


async def test_every_read_leaves_the_bank_as_it_was(live, capsys, tmp_path):
    running, dsn = live
    ids = running.ids
    pages = [*DASHBOARD_PAGES, f"/facts/personal/{ids['port']}",
             f"/facts/personal/{ids['port']}/duplicates", f"/facts/team/{ids['team']}"]
    before = await dump(dsn)
    assert before["handoffs"] and before["facts"] and before["timeline_events"]

    ran = []
    for argv in [*every_help(build_parser()), *read_commands(ids, tmp_path)]:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # --help exits 0
            code = exc.code
        out, err = capsys.readouterr()
        assert code == 0, (argv, out, err)
        ran.append(argv)
    async with httpx.AsyncClient(base_url=running.url, follow_redirects=True,
                                 timeout=60) as http:
        assert (await http.get(running.launch("/facts"))).status_code == 200  # the cookie
        for path in pages:
            r = await http.get(path)
            assert r.status_code == 200, (path, r.text[:500])
            ran.append(path)

    # The agent's read tools (MCP; the Pi extension calls the same routes).
    with Client(running.config, agent="claude-code") as client:
        server = mcp_server.build_server(lambda _ctx: client, local_files=False)
        async with McpClient(server) as mcp:
            for tool, arguments in (("search", {"query": "which port does the API use"}),
                                    ("get", {"id": ids["port"]}),
                                    ("get", {"id": ids["team"]}), ("list_categories", {})):
                result = await mcp.call_tool(tool, arguments)
                assert not result.is_error, (tool, result.content)
                ran.append(tool)

    after = await dump(dsn)
    assert not changed(before, after), "a read changed the bank:\n" + "\n".join(
        changed(before, after))
    assert len(ran) > 60

    # What the previews showed is still there for the real session start: the handoff (it is
    # meant for codex, whose session codex-7 is).
    with Client(running.config, agent="codex") as client:
        block = client.inject("session", "codex-7", project=PROJECT)
    assert f"Handoff #{ids['handoff']}" in block["text"]


def timeless(text: str) -> str:
    return re.sub(r"\d+ ?[a-z]+ ago", "_ ago", text)


async def test_a_preview_shows_what_the_session_gets_and_delivers_none_of_it(live, capsys):
    running, _ = live
    ids = running.ids
    capsys.readouterr()
    args = ("inject-preview", "--project", PROJECT, "--session-id", "codex-7", "--json")
    assert main(list(args)) == 0
    preview = json.loads(capsys.readouterr().out)
    assert f"Handoff #{ids['handoff']}" in preview["text"]
    assert main(list(args)) == 0  # the second preview shows it again: nothing was consumed
    second = json.loads(capsys.readouterr().out)
    assert timeless(second["text"]) == timeless(preview["text"])
    assert second["facts"] == preview["facts"]
    with Client(running.config, agent="codex") as client:
        real = client.inject("session", "codex-7", project=PROJECT)
        assert timeless(real["text"]) == timeless(preview["text"])
        again = client.inject("session", "codex-7", project=PROJECT)  # delivered once
    assert f"Handoff #{ids['handoff']}" not in again["text"]
    assert not set(again["facts"]) & set(real["facts"])
