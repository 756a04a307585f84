"""The MCP server through the official MCP client SDK, over both transports, against the
real services: stdio as an agent runs it (`factbank mcp --agent ...` subprocess) and stateless
streamable HTTP where every request carries the caller's own factbank token."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from factbank.runtime.runner import serve_apps_in_thread
from factbank_client import config as client_config
from factbank_client import mcp_server
from tests.integration.cli_env import Env
from tests.integration.cli_env import env as env  # both services on free ports, a repo, two banks
from tests.integration.mcp_stdio import call, call_fails, library, stdio_for, text_of

TOOLS = {"add", "search", "get", "supersede", "confirm", "dispute", "delete", "list_categories",
         "add_category", "handoff", "facts_to_enrich", "enrich", "review_queue",
         "decide_candidate", "queue_correction"}


def fact_id(text: str) -> int:
    return int(text.split("#", 1)[1].split()[0].rstrip(".,"))


PNPM = {"content": "The team uses pnpm, never npm", "category": "preferences",
        "source_kind": "user", "source_location": "", "quote": "we use pnpm, never npm",
        "origin": "user", "tags": ["pnpm", "包管理器", "package manager", "node"], "project": ""}


REDIS = {"content": "ledgerline's Redis runs on port 6380 in staging", "category": "environment",
         "source_kind": "user", "source_location": "", "quote": "redis: 6380", "origin": "user",
         "tags": ["redis", "cache"], "project": "",
         "questions": ["Which cache port does the billing service use?",
                       "账单服务的缓存开在哪个端口？"]}


# --- stdio -------------------------------------------------------------------------------


async def test_stdio_lists_tools_that_say_when_to_use_them(env: Env):
    async with stdio_for(env) as stdio:
        tools = {t.name: t for t in (await stdio.list_tools()).tools}
        info = stdio.server_info
    # stdio runs on the agent's machine: the code graph's tools too (docs/code-graph.md)
    assert set(tools) == TOOLS | {"find_callers", "find_references", "explain_symbol",
                                  "search_code"}
    add = tools["add"]
    assert "tags" in add.input_schema["required"]
    assert {"content", "category", "source_kind", "source_location", "quote"} <= set(
        add.input_schema["required"])
    assert "Chinese" in add.input_schema["properties"]["tags"]["description"]
    for tool in (add, tools["supersede"]):
        questions = tool.input_schema["properties"]["questions"]
        assert questions["type"] == "array" and questions["maxItems"] == 6
        assert "BOTH English and Chinese" in questions["description"]
        assert "questions" not in tool.input_schema["required"]
    text = (add.description or "").lower()
    for words in ("right away", "verbatim", "secret", "atomic", "honest", "chinese",
                  "`questions`: 2-4 questions", "everyday words", "0.60 to 0.94"):
        assert words in text, words
    assert "2-4 questions" in (mcp_server.TEXTS.instructions or "")
    assert "before assuming" in (tools["search"].description or "")
    assert "supersede" in (tools["dispute"].description or "")
    assert info is None or info.name == "factbank"


async def test_stdio_write_read_and_judge_by_id(env: Env):
    async with stdio_for(env) as stdio:
        await _write_read_and_judge(stdio, env)


async def _write_read_and_judge(stdio: Client, env: Env) -> None:
    out = await call(stdio, "add", **PNPM)
    assert out.startswith("Stored fact #") and "in personal" in out
    fid = fact_id(out)
    fact = library(env, env.personal.rw).get(fid)
    assert fact["created_by"]["agent"] == "claude-code"  # the --agent name travels
    assert fact["project"] is None and fact["tags"] == PNPM["tags"]

    # A file source: the quote is checked against the file in the agent's working dir, and
    # the project defaults to the repository's key.
    bad = await call_fails(stdio, "add", content="The API listens on port 9090",
                           category="environment", source_kind="file",
                           source_location="deploy/api.yaml:4", quote="port: 9090",
                           tags=["api", "端口"])
    assert "not in deploy/api.yaml" in bad
    out = await call(stdio, "add", content="The API listens on port 8080",
                     category="environment", source_kind="file",
                     source_location="deploy/api.yaml:4", quote="port: 8080",
                     tags=["api", "port", "端口"], origin="verified")
    port_id = fact_id(out)
    port = library(env, env.personal.rw).get(port_id)
    assert port["project"] == env.project and port["source"]["location"] == "deploy/api.yaml:4"

    # Tags are required (the schema says so); a call without them, or with [], gets one clear
    # sentence saying what to send, not a raw pydantic/jsonschema error.
    for body in ({k: v for k, v in PNPM.items() if k != "tags"}, {**PNPM, "tags": []}):
        missing = await stdio.call_tool("add", body)
        text = text_of(missing)
        assert missing.is_error and "tags is required" in text and "e.g." in text, text
        assert "pydantic" not in text and "validation error" not in text.lower(), text

    out = await call(stdio, "get", id=fid)
    assert f"#{fid} [personal" in out and "we use pnpm, never npm" in out and "created" in out

    out = await call(stdio, "confirm", id=fid, reason="the user repeated it")
    assert out.startswith(f"Confirmed #{fid}")
    out = await call(stdio, "dispute", id=port_id, reason="saw 8081 in the compose file")
    assert out.startswith(f"Disputed #{port_id}")
    err = await call_fails(stdio, "confirm", id=987654, reason="x")
    assert "not found" in err

    (env.repo / "deploy" / "api.yaml").write_text("server:\n  port: 8081\n", "utf-8")
    out = await call(stdio, "supersede", replaces=[port_id], reason="moved in the deploy change",
                     content="The API listens on port 8081", category="environment",
                     source_kind="file", source_location="deploy/api.yaml:2",
                     quote="port: 8081", tags=["api", "port", "端口"], origin="verified")
    new_id = fact_id(out)
    hist = library(env, env.personal.rw).history(port_id)
    assert hist["fact"]["status"] == "superseded" and hist["current"]["id"] == new_id
    out = await call(stdio, "get", id=port_id)
    assert "OUTDATED" in out and f"#{new_id}" in out

    out = await call(stdio, "delete", id=fid, reason="stored by mistake")
    assert "status deleted" in out


async def test_stdio_search_and_categories(env: Env):
    async with stdio_for(env) as stdio:
        await _search_and_categories(stdio)


async def _search_and_categories(stdio: Client) -> None:
    fid = fact_id(await call(stdio, "add", **PNPM))
    out = await call(stdio, "search", query="does the team use pnpm or npm")
    assert f"#{fid} [personal" in out and "trust 0.90" in out and ", match 1.00]" in out
    # A fact saved with writer questions is found through one; the output says which.
    out = await call(stdio, "add", **REDIS)
    assert "no questions" not in out
    rid = fact_id(out)
    out = await call(stdio, "search", query="账单服务的缓存开在哪个端口", project="")
    first, second = out.splitlines()[:2]
    assert first.startswith(f"#{rid} [personal")
    assert second == f"    (matched its question: {REDIS['questions'][1]!r})"
    # Without questions, the answer says how to add them.
    out = await call(stdio, "add", **{**PNPM, "content": "Releases are tagged vX.Y.Z",
                                      "quote": "tag releases vX.Y.Z"})
    assert "It has no questions" in out
    out = await call(stdio, "search", query="qqq zzz xxyyzz")
    assert out.startswith("No stored fact matches") or "#" in out

    out = await call(stdio, "list_categories")
    assert out.startswith("personal:") and "team:" in out and "preferences" in out
    out = await call(stdio, "add_category", name="runbooks", description="How to operate")
    assert "Added category 'runbooks' to personal" in out
    err = await call_fails(stdio, "add_category", name="runbooks", description="again")
    assert "409" in err


# --- streamable HTTP ---------------------------------------------------------------------


@contextlib.contextmanager
def mcp_http(env: Env) -> Iterator[str]:
    cfg = client_config.ClientConfig(url=env.urls.ingest_url, recall_url=env.urls.recall_url)
    with serve_apps_in_thread({"mcp": mcp_server.http_app(cfg)}) as urls:
        yield urls["mcp"] + "/mcp"


def over_http(url: str, headers: dict[str, str]) -> Client:
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    return Client(streamable_http_client(url, http_client=http))


async def test_http_forwards_each_callers_token_and_agent(env: Env):
    with mcp_http(env) as url:
        async with over_http(url, {"Authorization": f"Bearer {env.personal.rw}",
                                   "X-Factbank-Agent": "pi"}) as alice:
            assert {t.name for t in (await alice.list_tools()).tools} == TOOLS
            fid = fact_id(await call(alice, "add", **PNPM))
            out = await call(alice, "search", query="does the team use pnpm or npm")
            assert f"#{fid}" in out
        async with over_http(url, {"Authorization": f"Bearer {env.team.rw}"}) as team:
            # The team token reaches only the team bank: alice's fact is not there.
            err = await call_fails(team, "get", id=fid)
            assert "404" in err
            tid = fact_id(await call(team, "add", **{**PNPM, "content": "CI runs on Actions",
                                                     "quote": "CI is on GitHub Actions",
                                                     "tags": ["ci", "持续集成"]}))
    fact = library(env, env.personal.rw).get(fid)
    assert fact["bank"] == "alice" and fact["created_by"]["agent"] == "pi"
    team_fact = library(env, env.team.rw).get(tid)
    assert team_fact["bank"] == "acme" and team_fact["created_by"]["agent"] == "mcp-http"


async def test_http_refuses_a_wrong_or_missing_token(env: Env):
    with mcp_http(env) as url:
        init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient() as raw:
            r = await raw.post(url, json=init, headers=accept)
            assert r.status_code == 401 and "missing bearer token" in r.text
            assert r.headers["www-authenticate"].startswith("Bearer")
            r = await raw.post(url, json=init,
                               headers={**accept, "Authorization": "Bearer fb_wrong"})
            assert r.status_code == 401 and "invalid or revoked token" in r.text

        # Through the SDK: a wrong token fails the connection or the call, never succeeds.
        with pytest.raises(BaseException) as info:
            async with over_http(url, {"Authorization": "Bearer fb_wrong"}) as bad:
                await bad.call_tool("search", {"query": "pnpm"})
        assert "401 invalid or revoked token" in repr(info.value), info.value


async def test_http_tool_call_fails_when_the_token_is_revoked_meanwhile(env: Env, conn):
    from factbank.store import banks

    _, token = await banks.issue_token(conn, "alice", "alice", "read,write")
    with mcp_http(env) as url:
        async with over_http(url, {"Authorization": f"Bearer {token}"}) as client:
            await call(client, "list_categories")
            token_id = await conn.fetchval(
                "SELECT max(id) FROM tokens WHERE bank_id = (SELECT id FROM banks "
                "WHERE name = 'alice')")
            await banks.revoke_token(conn, token_id)
            # The middleware cached its verdict; the services check the forwarded token.
            err = await call_fails(client, "add", **PNPM)
            assert "401" in err and "invalid or revoked" in err
