"""The MCP `handoff` tool: an agent leaves a note for the next session in the
project; the note names its files relative to the repository root, reaches only the agent it
is for (`claude-code`, the MCP name, means Claude Code's sessions: `claude`), appears once in
that session's start block, and is never a fact."""

from __future__ import annotations

from factbank_client.client import Client as FactbankClient
from tests.integration.cli_env import Env
from tests.integration.cli_env import env as env  # the fixture
from tests.integration.mcp_stdio import call, call_fails, library, stdio_for


def session_block(client: FactbankClient, session: str, project: str) -> str:
    return client.inject("session", session_id=session, project=project)["text"]


async def test_handoff_tool_leaves_a_note_for_the_next_claude_session(env: Env):
    (env.repo / "src").mkdir()
    async with stdio_for(env) as stdio:
        out = await call(stdio, "handoff", text="Retry refactor half done; tests fail",
                         to_agent="claude-code", files=[str(env.repo / "src" / "retry.py")],
                         fact_ids=[12])
        assert out.startswith("handoff #") and "for claude in github.com/acme/api" in out
        # the timeline goes to the team bank when there is one
        assert "in team bank acme, visible to 1 member (alice)" in out
        refused = await call_fails(stdio, "handoff", text="x", project="")
        assert "project" in refused
    lib = library(env, env.team.rw)
    (h,) = lib.handoffs(project=env.project, open_only=True)
    assert h["files"] == ["src/retry.py"] and h["fact_ids"] == [12]
    assert h["to_agent"] == "claude" and h["author_agent"] == "claude-code"
    assert lib.search("Retry refactor half done")["results"] == []  # never a fact
    # A Codex session does not get it; the next Claude Code session does, once.
    lib.record_events([{"session_id": "cx-9", "kind": "session_start", "agent": "codex",
                        "project": env.project}])
    assert "Retry refactor" not in session_block(lib, "cx-9", env.project)
    lib.record_events([{"session_id": "cc-9", "kind": "session_start", "agent": "claude",
                        "project": env.project}])
    block = session_block(lib, "cc-9", env.project)
    assert "Handoff #" in block and "Retry refactor half done; tests fail [src/retry.py; #12]" \
        in block
    assert "Retry refactor" not in session_block(lib, "cc-10", env.project)
