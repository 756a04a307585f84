"""a claim the bank already retired (superseded or deleted) that is added again is
answered with what holds now and why, as recall answers a retired hit, and not stored as a new
active fact. Every write path: HTTP add, batch add (import, per fact), import with queued
vectors, and import of restore lines with `existing=reinforce`. Storing the claim again takes
an explicit supersede of its successor.
"""

from __future__ import annotations

import json

import pytest

from factbank.store import audit
from factbank_client import render
from tests.integration.conftest import auth, fact_body, make_bank

OLD = "The API listens on port 8080"
NEW = "The API listens on port 8443"
WHY = "moved behind TLS"


async def add_via(stack, token: str, path: str, body: dict) -> dict:
    """One fact through a write path; returns its outcome."""
    if path == "add":
        r = await stack.ingest.post("/v1/facts", json=body, headers=auth(token))
    else:
        vectors, existing, restore = {
            "batch": ("now", "reinforce", False),
            "import-queue": ("queue", "reinforce", False),
            "import-restore": ("now", "reinforce", True),
            "import-restore-queue": ("queue", "reinforce", True),
        }[path]
        if restore:
            body = {**body, "restore": {"id": 3, "status": "active", "trust": 0.5}}
        r = await stack.ingest.post("/v1/facts/import", params={"vectors": vectors,
                                                                 "existing": existing},
                                    content=json.dumps(body) + "\n", headers=auth(token))
        assert r.status_code == 201, r.text
        return r.json()["results"][0]
    assert r.status_code in (200, 201), r.text
    out = r.json()
    assert (r.status_code == 200) == (out["status"] == "retired")
    return out


PATHS = ["add", "batch", "import-queue", "import-restore", "import-restore-queue"]


async def count(conn, content: str) -> int:
    return await conn.fetchval("SELECT count(*) FROM facts WHERE content = $1", content)


@pytest.mark.parametrize("path", PATHS)
async def test_a_superseded_claim_added_again_answers_its_successor(stack, conn, path):
    bank = await make_bank(conn, "alpha")
    old = (await add_via(stack, bank.rw, "add", fact_body(OLD)))["fact"]["id"]
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": fact_body(NEW, quote="port: 8443"), "replaces": [old], "reason": WHY},
        headers=auth(bank.rw))
    new = r.json()["fact"]["id"]
    events = await conn.fetchval("SELECT count(*) FROM fact_events")
    audits = await audit.count(conn)
    # What `check` says a save would do agrees with the save.
    r = await stack.ingest.post("/v1/facts/check", json={"facts": [fact_body(OLD)]},
                                headers=auth(bank.rw))
    verdict = r.json()["results"][0]
    assert (verdict["verdict"], verdict["same_as"]) == ("retired", old), r.text
    out = await add_via(stack, bank.rw, path, fact_body(OLD))
    assert out["status"] == "retired"
    assert out["fact"]["id"] == old and out["fact"]["status"] == "superseded"
    assert out["successor"]["id"] == new and out["successor"]["content"] == NEW
    assert out["via"] == {"superseded": old, "reason": WHY}
    assert f"supersede #{new}" in out["note"]
    said = render.outcome_text(out, lambda n: n, "")
    assert said.startswith("Not stored") and f"fact #{new}" in said
    # Nothing stored, nothing reinforced, nothing recorded.
    assert await count(conn, OLD) == 1
    assert await conn.fetchval("SELECT count(*) FROM fact_events") == events
    assert await audit.count(conn) == audits
    # The search still leads with what holds now.
    r = await stack.recall.post("/v1/search", json={"query": "which port does the API use"},
                                headers=auth(bank.rw))
    assert r.status_code == 200 and r.json()["results"][0]["fact"]["id"] == new, r.text
    # An explicit supersede of the successor stores it again.
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": fact_body(OLD), "replaces": [new], "reason": "rolled back"},
        headers=auth(bank.rw))
    assert r.status_code == 201, r.text
    assert await conn.fetchval(
        "SELECT count(*) FROM facts WHERE content = $1 AND status = 'active'", OLD) == 1


@pytest.mark.parametrize("path", PATHS)
async def test_a_deleted_claim_added_again_is_not_stored(stack, conn, path):
    bank = await make_bank(conn, "alpha")
    gone = (await add_via(stack, bank.rw, "add", fact_body(OLD)))["fact"]["id"]
    r = await stack.ingest.delete(f"/v1/facts/{gone}", params={"reason": "the API is retired"},
                                  headers=auth(bank.rw))
    assert r.status_code == 200, r.text
    out = await add_via(stack, bank.rw, path, fact_body(OLD))
    assert out["status"] == "retired" and out["successor"] is None
    assert out["fact"]["id"] == gone and out["fact"]["status"] == "deleted"
    assert "the API is retired" in out["note"] and f"supersede #{gone}" in out["note"]
    assert await count(conn, OLD) == 1
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": fact_body(OLD), "replaces": [gone], "reason": "back in service"},
        headers=auth(bank.rw))
    assert r.status_code == 201, r.text
    assert await conn.fetchval(
        "SELECT count(*) FROM facts WHERE content = $1 AND status = 'active'", OLD) == 1


async def test_an_active_copy_wins_over_a_retired_one(stack, conn):
    """Stored again by supersede, the claim is active: a further add reinforces it."""
    bank = await make_bank(conn, "alpha")
    old = (await add_via(stack, bank.rw, "add", fact_body(OLD)))["fact"]["id"]
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": fact_body(NEW), "replaces": [old], "reason": WHY}, headers=auth(bank.rw))
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": fact_body(OLD), "replaces": [r.json()["fact"]["id"]], "reason": "rolled back"},
        headers=auth(bank.rw))
    back = r.json()["fact"]["id"]
    for path in PATHS:
        out = await add_via(stack, bank.rw, path, fact_body(OLD))
        assert (out["status"], out["fact"]["id"]) == ("reinforced", back), path
