"""The enrich loop for real: `factbank enrich` in a terminal hands a bare fact to a headless
Claude Code (the dispatch machinery) whose model, the fake model server, writes its tags and
questions through factbank's MCP tool `enrich`; the fact is then found by a question that
shares no word with it, and the edit is in its history, by Claude Code."""

from __future__ import annotations

import re

import httpx
import pytest

from .e2e import Services, cli, cli_env, hook_log, install, login, repository
from .fake_model import FakeModel, Rule, Text, ToolCall, tool_names
from .npm import Harnesses
from .runners import claude_env

pytestmark = pytest.mark.harness

TOOL = "mcp__factbank__enrich"


def test_factbank_enrich_dispatches_claude_which_writes_questions_through_mcp(
    harnesses: Harnesses, fake_model: FakeModel, harness_home, tmp_path, services: Services,
) -> None:
    services.require_inject()
    home = harness_home
    repo = repository(tmp_path / "repo", "git@github.com:acme/dispatch-e2e.git")
    fid = services.add("tidemark's nightly job runs on gpu-box-3 at 02:00 UTC (FBENRICH7)",
                       "environment", None, [])
    tags = ["tidemark", "nightly", "夜跑", "gpu"]
    questions = ["When does the data pipeline run each night?", "数据管道每天几点跑？"]
    login(home, services)
    install(home, "claude")
    fake_model.script(
        # Claude offers WaitForMcpServers until factbank's MCP server is up.
        Rule(ToolCall("WaitForMcpServers", {}), api="anthropic", times=5,
             when=lambda b: TOOL not in tool_names(b) and "WaitForMcpServers" in tool_names(b)),
        ToolCall(TOOL, {"id": fid, "tags": tags, "questions": questions}),
        Text("Enriched the fact."))
    env = cli_env(home, tmp_path / "state", claude_env(home, fake_model, harnesses),
                  harnesses.claude)

    listed = cli(env, "enrich", "--list", "--json", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    assert '"remaining": 1' in listed.stdout and f'"id": {fid}' in listed.stdout

    proc = cli(env, "enrich", "--by", "claude", "--repo", str(repo), cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr + hook_log(home)
    assert "enriched 1 of 1 fact(s) in personal" in proc.stdout, proc.stdout + proc.stderr
    # The model was given the fact by id and offered the tool.
    asked = fake_model.requests_containing("FBENRICH7")
    assert asked and any(TOOL in tool_names(r.body) for r in fake_model.requests
                         if r.api == "anthropic"), hook_log(home)
    assert re.search(rf"#{fid} \(environment\) tidemark's nightly job", asked[0].dumps())

    r = httpx.get(f"{services.ingest}/v1/facts/{fid}", headers=services.headers(), timeout=30)
    fact, events = r.json()["fact"], r.json()["events"]
    assert fact["tags"] == tags and fact["questions"] == questions
    (edited,) = [e for e in events if e["kind"] == "edited"]
    assert edited["agent"] == "claude-code" and "questions changed" in edited["reason"]
    # Found now by a question that shares no word with the fact.
    r = httpx.post(f"{services.recall}/v1/search", headers=services.headers(), timeout=60,
                   json={"query": "数据管道每天几点跑？"})
    top = r.json()["results"][0]
    assert top["fact"]["id"] == fid and top["match"].startswith("question: "), top
    # Nothing is left to enrich.
    after = cli(env, "enrich", "--list", "--json", cwd=repo)
    assert '"remaining": 0' in after.stdout
