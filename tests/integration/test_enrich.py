"""Questions for facts that have none: `GET /v1/enrich` hands out the facts lacking questions
or tags, an agent writes them through the MCP tools (`facts_to_enrich`, `enrich`: the normal
PATCH path, redacted and audited) or the CLI lists them; and the review queue's MCP tools.

The fixtures are cli_env's (both services on free ports, a repository, two banks) and
mcp_stdio's (the MCP server as an agent runs it, over stdio)."""

from __future__ import annotations

import json

import httpx

from tests.integration.cli_env import Env, ok
from tests.integration.cli_env import env as env  # the fixture
from tests.integration.mcp_stdio import call, library, stdio_for
from tests.integration.secrets_probe import GITHUB


def bare(env: Env, content: str, **over) -> int:
    body = {"content": content, "category": "environment",
            "source": {"kind": "user", "location": "user said"}, "quote": content,
            "origin": "user", **over}
    r = httpx.post(env.urls.ingest_url + "/v1/facts/import",
                   content=json.dumps(body).encode(),
                   headers={"Authorization": f"Bearer {env.personal.rw}"})
    assert r.status_code == 201, r.text
    return r.json()["results"][0]["fact"]["id"]


async def test_an_agent_enriches_the_facts_it_is_handed(env: Env, capsys):
    redis = bare(env, "ledgerline's staging Redis listens on 6380")
    gpu = bare(env, "tidemark trains on gpu-box-3", tags=["tidemark", "gpu"])
    done = bare(env, "We use pnpm", tags=["pnpm"], questions=["npm or pnpm?"])
    lib = library(env, env.personal.rw)
    batch = lib.enrich_batch()
    assert [f["id"] for f in batch["facts"]] == [redis, gpu] and batch["remaining"] == 2
    assert [f["id"] for f in lib.enrich_batch(lacking="tags")["facts"]] == [redis]

    async with stdio_for(env) as stdio:
        listed = await call(stdio, "facts_to_enrich", limit=5)
        assert f"#{redis} (environment; 0 tags, 0 questions)" in listed
        assert f"#{done} " not in listed and "call enrich with its id" in listed
        out = await call(stdio, "enrich", id=redis, tags=["redis", "缓存"],
                         questions=["Which port does the staging cache use?",
                                    f"预发缓存端口是多少？ {GITHUB}"])
        assert out == f"Fact #{redis} now has 2 tags and 2 questions."
        await call(stdio, "enrich", id=gpu, questions=["Where does tidemark train?"])
        assert "No fact lacks" in await call(stdio, "facts_to_enrich")

    history = lib.history(redis)
    assert history["fact"]["tags"] == ["redis", "缓存"]
    assert GITHUB not in json.dumps(history) and "[REDACTED" in history["fact"]["questions"][1]
    (edited,) = [e for e in history["events"] if e["kind"] == "edited"]
    assert edited["agent"] == "claude-code"
    assert lib.get(gpu)["tags"] == ["tidemark", "gpu"]  # kept: nothing given
    assert lib.enrich_batch()["remaining"] == 0
    out = json.loads(ok(capsys, "enrich", "--list", "--json"))
    assert out["facts"] == [] and out["remaining"] == 0
    # The questions are searched: the fact is found by one of them.
    hits = lib.search("Which port does the staging cache use?")["results"]
    assert hits[0]["fact"]["id"] == redis and hits[0]["match"].startswith("question: ")


def test_the_batch_is_read_scoped_and_the_edit_write_scoped(env: Env):
    fid = bare(env, "The nightly job starts at 02:00 UTC")
    ro = httpx.Client(base_url=env.urls.recall_url,
                      headers={"Authorization": f"Bearer {env.personal.ro}"})
    assert [f["id"] for f in ro.get("/v1/enrich").json()["facts"]] == [fid]
    r = ro.get("/v1/enrich", params={"lacking": "colour"})
    assert r.status_code == 400 and "lacking" in r.text
    assert ro.get("/v1/enrich", params={"limit": 0}).status_code == 400
    r = httpx.patch(f"{env.urls.ingest_url}/v1/facts/{fid}", json={"questions": ["when?"]},
                    headers={"Authorization": f"Bearer {env.personal.ro}"})
    assert r.status_code == 403


async def test_the_review_queue_through_mcp(env: Env):
    lib = library(env, env.personal.rw)
    old = bare(env, "The API listens on port 8080", tags=["api"])
    async with stdio_for(env) as stdio:
        assert await call(stdio, "review_queue") == "The review queue is empty."
        out = await call(stdio, "queue_correction", replaces=old, reason="the user said so",
                         content="The API listens on port 8081", category="environment",
                         source_kind="user", source_location="", quote="it is 8081 now",
                         tags=["api", "端口"])
        cand = int(out.split("candidate ", 1)[1].split()[0])
        assert lib.get(old)["status"] == "active"  # queued, not saved
        listed = await call(stdio, "review_queue")
        assert f"candidate {cand} (personal, correction, pending) supersedes #{old}" in listed
        out = await call(stdio, "decide_candidate", id=cand, accept=True)
        assert out.startswith(f"Accepted candidate {cand}: stored #")
        assert lib.get(old)["status"] == "superseded"
        assert lib.history(old)["fact"]["supersede_reason"] == "the user said so"
