"""Verify before inject, the server's half (docs/staleness.md): a block hands the client the
facts of the caller's project that quote a file (`sources`: source, quote, fingerprint), and
none of another project's or of another source kind; ids the client left out (`withheld`)
are not counted as seen, so they come back in the same session; and leaving a fact out tells
the bank nothing (the fact stays active, no event). Against the real services and Postgres."""

from __future__ import annotations

from tests.integration.conftest import auth, fact_body
from tests.integration.staleness_api import PROJECT, add, file_fact, history, inject_ids


async def test_sources_are_this_projects_file_facts_and_withheld_comes_back(stack, two_banks):
    alpha, _ = two_banks
    port = (await add(stack, alpha.rw, file_fact("The API listens on port 8080",
                                                 "deploy/api.yaml:12", "port: 8080")))["fact"]
    said = (await add(stack, alpha.rw, fact_body(
        "The API team wants blue-green deploys", category="decisions", project=PROJECT,
        source={"kind": "user"}, quote="we deploy blue-green")))["fact"]
    # A global fact quoting a file: that path means nothing in this repository.
    other = (await add(stack, alpha.rw, fact_body(
        "The user's shell aliases ll to ls -la", category="preferences",
        source={"kind": "file", "location": ".bashrc:3"}, quote="alias ll='ls -la'")))["fact"]

    first = await inject_ids(stack, alpha.rw, "s1")
    assert {port["id"], said["id"], other["id"]} <= set(first["facts"])
    assert [s["id"] for s in first["sources"]] == [port["id"]]  # only this project's file fact
    src = first["sources"][0]
    assert src["source"] == {"kind": "file", "location": "deploy/api.yaml:12"}
    assert src["quote"] == "port: 8080"
    assert src["fingerprint"]["path"] == "deploy/api.yaml" and src["fingerprint"]["line"] == 12

    # Shown once per session: the next block of the session does not repeat it...
    again = await inject_ids(stack, alpha.rw, "s1")
    assert port["id"] not in again["facts"]
    # ...unless the client says it left it out (its working tree contradicted the quote).
    body = {"kind": "session", "session_id": "s1", "project": PROJECT,
            "withheld": [port["id"]]}
    r = await stack.recall.post("/v1/inject", json=body, headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    assert port["id"] in r.json()["facts"] and said["id"] not in r.json()["facts"]
    # The prompt block honours it the same way.
    asked = await inject_ids(stack, alpha.rw, "s2", prompt="which port does the API listen on?")
    assert port["id"] in asked["facts"]
    assert [s["id"] for s in asked["sources"]] == [port["id"]]
    assert port["id"] not in (await inject_ids(stack, alpha.rw, "s2",
                                               prompt="which port does the API listen on?"))[
                                                   "facts"]
    body = {"kind": "prompt", "session_id": "s2", "project": PROJECT,
            "prompt": "which port does the API listen on?", "withheld": [port["id"]]}
    r = await stack.recall.post("/v1/inject", json=body, headers=auth(alpha.rw))
    assert port["id"] in r.json()["facts"]

    # Nothing about the fact changed in the bank.
    got = await history(stack, alpha.ro, port["id"])
    assert got["fact"]["status"] == "active" and got["fact"]["stale"] is None
    assert [e["kind"] for e in got["events"]] == ["created"]


async def test_withheld_is_bounded_and_typed(stack, two_banks):
    alpha, _ = two_banks
    for bad, field in (([1] * 201, "withheld"), (["x"], "withheld")):
        body = {"kind": "session", "session_id": "s", "withheld": bad}
        r = await stack.recall.post("/v1/inject", json=body, headers=auth(alpha.rw))
        assert r.status_code == 400 and field in r.text, r.text
