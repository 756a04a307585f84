"""Where a write goes and who can read it, in every write's answer: the API's
(`visible_to`), the CLI's line, the MCP tool's text; and `add --help` says what routing does.

Observed: a member given a token of the team bank ran `factbank login --token ...` (saved under
the default label "personal"), added a fact and read "stored fact 6 in personal", while all
the team read it. And `add --help` promised that team categories go to the team bank, where
no category does unless the config lists it in `team_categories`.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client as McpClient

from factbank.store import banks
from factbank_client import config as client_config
from factbank_client import mcp_server
from factbank_client.cli.main import main
from factbank_client.client import Client
from tests.integration import cli_env
from tests.integration.cli_env import Env, ok, ok_json

env = cli_env.env  # both services on free ports, a repo, banks alice (personal), acme (team)

TEAM = 'team bank acme, visible to 3 members (alice, bob, carol)'


async def team_of_three(conn) -> None:
    """acme's readers: alice (already), bob, carol. dave may only write and erin's token is
    revoked: neither can read what is written, so neither is counted."""
    await banks.issue_token(conn, "acme", "bob", "read,write")
    await banks.issue_token(conn, "acme", "carol", "read")
    await banks.issue_token(conn, "acme", "dave", "write")
    erin, _ = await banks.issue_token(conn, "acme", "erin", "read")
    await banks.revoke_token(conn, erin.id)


def login(capsys, env: Env, token: str, *extra: str) -> None:
    ok(capsys, "login", "--url", env.urls.ingest_url, "--recall-url", env.urls.recall_url,
       "--token", token, *extra)


FACT = ("--source-kind", "user", "--quote", "we chose postgres", "--tag", "postgres",
        "--tag", "数据库")


async def test_a_team_token_saved_as_personal_says_it_is_the_team_bank(env, conn, capsys):
    await team_of_three(conn)
    login(capsys, env, env.team.rw)  # the default label: "personal"
    out = ok(capsys, "add", "We chose Postgres over MySQL", "--category", "decisions", *FACT)
    assert out.startswith("stored fact ")
    assert 'in team bank acme (configured here as "personal"), visible to 3 members ' \
           "(alice, bob, carol)" in out, out
    data = ok_json(capsys, "add", "Staging runs on host stg1", "--category", "environment",
                   "--source-kind", "user", "--quote", "stg1", "--tag", "staging")
    assert data["visible_to"] == {"bank": "acme", "kind": "team", "members": 3,
                                  "names": ["alice", "bob", "carol"]}


async def test_routing_is_what_add_help_says(env, conn, capsys):
    await team_of_three(conn)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["add", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Default: personal; a category listed in `team_categories` in the config goes to " \
           "team (none is, unless you list it)" in help_text
    assert "who can read it" in help_text

    login(capsys, env, env.personal.rw)
    login(capsys, env, env.team.rw, "--bank", "team")
    # No category goes to team by default, not even decisions.
    out = ok(capsys, "add", "We chose Postgres over MySQL", "--category", "decisions", *FACT)
    assert "in personal bank alice, visible to 1 member (alice)" in out, out
    # Listed in team_categories: team.
    cfg = env.config_path.read_text("utf-8")
    env.config_path.write_text('team_categories = ["decisions"]\n' + cfg, "utf-8")
    out = ok(capsys, "add", "We chose litestar over FastAPI", "--category", "decisions",
             "--source-kind", "user", "--quote", "we chose litestar", "--tag", "litestar")
    assert f"in {TEAM}" in out, out
    # --bank says where, whatever the category.
    out = ok(capsys, "add", "The CI runners are on host ci-02", "--category", "environment",
             "--source-kind", "user", "--quote", "ci-02", "--tag", "ci", "--bank", "team")
    assert f"in {TEAM}" in out, out


async def test_every_write_answer_names_bank_and_readers(env, conn, capsys, tmp_path):
    await team_of_three(conn)
    login(capsys, env, env.personal.rw)
    login(capsys, env, env.team.rw, "--bank", "team")
    old = ok_json(capsys, "add", "Deploys go through ArgoCD", "--category", "decisions",
                  "--source-kind", "user", "--quote", "argo", "--tag", "argo", "--bank",
                  "team")["fact"]["id"]
    out = ok(capsys, "supersede", str(old), "--reason", "moved to Flux", "--content",
             "Deploys go through Flux", "--source-kind", "user", "--quote", "flux")
    assert f"in {TEAM}" in out, out
    lines = tmp_path / "facts.jsonl"
    lines.write_text(json.dumps({
        "content": "The VPN gateway is vpn.acme.dev", "category": "environment",
        "source": {"kind": "user", "location": ""}, "quote": "vpn.acme.dev",
        "tags": ["vpn"]}) + "\n", "utf-8")
    out = ok(capsys, "import", str(lines), "--bank", "team", "--no-wait")
    assert f"into {TEAM}:" in out, out
    out = ok(capsys, "handoff", "Flux migration half done", "--project", "github.com/acme/api")
    assert f"in {TEAM}:" in out, out  # handoffs go to the team bank when one is configured
    out = ok(capsys, "add", "I prefer vim keybindings", "--category", "preferences",
             "--source-kind", "user", "--quote", "vim", "--tag", "vim", "--global")
    assert "in personal bank alice, visible to 1 member (alice)" in out, out

    # The MCP add tool's answer says the same.
    cfg = client_config.load(env.config_path)
    client = Client(cfg, agent="claude-code")
    server = mcp_server.build_server(lambda _ctx: client, local_files=False)
    async with McpClient(server) as mcp:
        result = await mcp.call_tool("add", {
            "content": "The team standup is at 09:30", "category": "people",
            "source_kind": "user", "source_location": "", "quote": "standup 09:30",
            "origin": "user", "tags": ["standup", "站会"], "project": ""})
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, text
    assert "in personal bank alice, visible to 1 member (alice)" in text, text
    client.close()
