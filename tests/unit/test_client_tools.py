"""One table of agent tools (assets/tools.toml): the MCP server and the installed Pi extension
describe their tools in its words and build their schemas from the same constants
(factbank_common/schema.py), and no harness is told to call a tool it does not offer."""

from __future__ import annotations

import copy
import re

import pytest
from mcp import Client as McpClient

from factbank_client import mcp_server, tools
from factbank_client.tools import texts, tool_name
from factbank_common import schema
from tests.unit.pi_ts import run_ts


def server(local_files: bool = True):
    """The stdio server (local files: every tool, the code graph's included), or the
    streamable-HTTP one (no checkout)."""
    return mcp_server.build_server(lambda _ctx: None,  # type: ignore[arg-type]
                                   local_files=local_files)


async def mcp_tools(local_files: bool = True) -> dict[str, dict]:
    """The tool list as an MCP client receives it: name -> description and input schema."""
    async with McpClient(server(local_files)) as client:
        listed = (await client.list_tools()).tools
    return {t.name: {"description": t.description, "schema": t.input_schema} for t in listed}


def pi_tools() -> dict[str, dict]:
    return run_ts("const tools = {}; m.default({on() {}, registerTool(t) { tools[t.name] = t; }});"
                  "result = tools;")


async def test_mcp_shows_exactly_the_table() -> None:
    table = tools._table()
    got = await mcp_tools()
    mcp = texts("mcp")
    assert list(got) == list(table["tools"]) == list(mcp.tools)
    for key, tool in mcp.tools.items():
        assert got[key]["description"] == tool.description
        props = got[key]["schema"].get("properties", {})
        assert list(props) == table["tools"][key]["takes"] == list(tool.params)
        assert {p: v["description"] for p, v in props.items()} == tool.params
    assert server().instructions == mcp.instructions == table["mcp"]["instructions"].replace(
        "{", "").replace("}", "")
    add = got["add"]["schema"]["properties"]
    assert add["source_kind"]["enum"] == list(schema.SOURCE_KINDS)
    assert add["origin"]["enum"] == list(schema.ORIGINS)
    assert add["questions"]["maxItems"] == schema.MAX_QUESTIONS
    limit = got["search"]["schema"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (
        1, schema.SEARCH_LIMIT_MAX, schema.SEARCH_LIMIT)


async def test_the_http_server_offers_every_tool_but_the_local_code_graph() -> None:
    """The code graph reads the agent's own checkout; a shared HTTP server has none."""
    table = tools._table()
    local = [key for key, spec in table["tools"].items() if spec.get("local")]
    assert local == ["find_callers", "find_references", "explain_symbol", "search_code"]
    got = await mcp_tools(local_files=False)
    assert list(got) == [key for key in table["tools"] if key not in local]


def _pi_wording(text: str) -> str:
    """An MCP text as Pi names the tools (MCP's texts quote a tool's name: `supersede`)."""
    for key in texts("mcp").tools:
        text = text.replace(f"`{key}`", f"`{tool_name(key, 'pi')}`")
    return text


async def test_the_installed_pi_extension_says_what_mcp_says() -> None:
    mcp = await mcp_tools()
    pi = pi_tools()
    table = tools._table()
    offered = table["pi"]["tools"]
    assert sorted(pi) == sorted(tool_name(key, "pi") for key in offered)
    overridden = set(table["pi"].get("params", {}))
    for key in offered:
        got = pi[tool_name(key, "pi")]
        assert got["label"] == f"factbank {key}"
        assert got["description"] == _pi_wording(mcp[key]["description"])
        props = got["parameters"]["properties"]
        assert list(props) == list(mcp[key]["schema"]["properties"])
        assert got["parameters"]["required"] == mcp[key]["schema"]["required"]
        for param, prop in props.items():
            want = mcp[key]["schema"]["properties"][param]["description"]
            if param in overridden:
                assert prop["description"] == table["pi"]["params"][param]
            else:
                assert prop["description"] == _pi_wording(want), (key, param)
        if "source_kind" in props:
            assert props["source_kind"]["enum"] == list(schema.SOURCE_KINDS)
            assert props["origin"]["enum"] == list(schema.ORIGINS)
            assert props["questions"]["maxItems"] == schema.MAX_QUESTIONS
    limit = pi["factbank_search"]["parameters"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (
        1, schema.SEARCH_LIMIT_MAX, schema.SEARCH_LIMIT)


def test_pi_wording_differs_only_where_the_shared_text_names_a_tool_pi_lacks() -> None:
    table = tools._table()
    lacking = set(table["tools"]) - set(table["pi"]["tools"])
    for param in table["pi"].get("params", {}):
        named = set(re.findall(r"\{(\w+)\}", table["params"][param]))
        assert named & lacking, f"[pi.params] {param} overrides a text Pi could share"


@pytest.fixture
def table(monkeypatch):
    """A copy of the table to break; texts() reads it afresh while the test runs."""
    data = copy.deepcopy(tools._table())
    monkeypatch.setattr(tools, "_table", lambda: data)
    tools.texts.cache_clear()
    yield data
    tools.texts.cache_clear()


def test_a_text_naming_a_tool_the_harness_lacks_is_refused(table) -> None:
    table["tools"]["dispute"]["description"] += " See `{list_categories}`."
    assert "`list_categories`" in texts("mcp").tools["dispute"].description
    with pytest.raises(ValueError, match=r"dispute names the tool 'list_categories'.*pi"):
        texts("pi")


def test_a_parameter_without_a_text_is_refused(table) -> None:
    table["tools"]["get"]["takes"].append("verbose")
    with pytest.raises(ValueError, match="no text for parameter 'verbose' of get"):
        texts("mcp")
