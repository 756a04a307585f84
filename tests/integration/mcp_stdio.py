"""factbank's MCP server as an agent runs it (`factbank mcp` over stdio, through the official
MCP client SDK), for the tests on `cli_env.env`: `stdio_for`, `call`, `call_fails`, and
`library`, the client library on the same services."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from factbank_client import config as client_config
from factbank_client.client import Client as FactbankClient
from tests.integration.cli_env import Env


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def library(env: Env, token: str) -> FactbankClient:
    return FactbankClient(client_config.ClientConfig(
        url=env.urls.ingest_url, recall_url=env.urls.recall_url, tokens={"personal": token}))


async def call(client: Client, tool: str, /, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def call_fails(client: Client, tool: str, /, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, text_of(result)
    return text_of(result)


@contextlib.asynccontextmanager
async def stdio_for(env: Env) -> AsyncIterator[Client]:
    """Not a fixture: the SDK's task group must be entered and left in the same task."""
    client_config.save_login(env.urls.ingest_url, env.personal.rw, recall_url=env.urls.recall_url,
                             path=env.config_path)
    client_config.save_login(env.urls.ingest_url, env.team.rw, "team",
                             recall_url=env.urls.recall_url, path=env.config_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "factbank_client.cli.main", "mcp", "--agent", "claude-code"],
        env={"FACTBANK_CONFIG": str(env.config_path)}, cwd=str(env.repo))
    async with Client(params, read_timeout_seconds=60) as client:
        yield client
