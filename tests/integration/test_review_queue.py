"""The review queue against the real services and real git: a commit that changes a quoted
line makes `verify` queue a successor (nothing stored); accepting it supersedes through the
normal write path with "source changed in <commit>"; a rejected candidate is not proposed
again for the same source text; candidates are redacted; the token scopes hold.

The fixtures are tests/integration/cli_repo.py's (both services in a thread, a real repository)."""

from __future__ import annotations

import httpx

from tests.conftest import git
from tests.integration.cli_env import ok_json, run
from tests.integration.cli_repo import API_YAML, add_file_fact
from tests.integration.cli_repo import env as env  # the fixture
from tests.integration.secrets_probe import GITHUB


def commit_file(repo, rel: str, text: str, message: str) -> str:
    (repo / rel).write_text(text, "utf-8")
    git(repo, "commit", "-q", "-am", message)
    return git(repo, "rev-parse", "HEAD")


def test_a_changed_quoted_line_queues_a_successor_and_accepting_supersedes(env, capsys):
    port = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                         "port: 8080")
    # The port changes and a comment goes in above it: the successor is the new line, at its
    # new place.
    sha = commit_file(env.repo, "deploy/api.yaml",
                      API_YAML.replace("server:\n", "# the public API\nserver:\n")
                      .replace("port: 8080", "port: 9443"), "serve on 9443")
    report = ok_json(capsys, "verify")
    (stale,) = [v for v in report["verdicts"] if v["verdict"] == "stale"]
    assert stale["successor"]["quote"] == "port: 9443"
    assert stale["successor"]["location"] == "deploy/api.yaml:5"
    assert stale["successor"]["commit"] == sha
    (cand_id,) = report["banks"]["personal"]["proposed"]

    # Nothing entered the bank: the fact is stale, no new fact.
    assert ok_json(capsys, "get", str(port["id"]))["status"] == "stale"
    assert ok_json(capsys, "stats")["personal"]["facts"] == {"stale": 1}

    (cand,) = ok_json(capsys, "queue", "list")["candidates"]
    assert cand["id"] == cand_id and cand["kind"] == "successor"
    assert cand["replaces"] == port["id"] and cand["status"] == "pending"
    assert cand["reason"] == f"source changed in {sha[:12]}"
    assert cand["fact"]["quote"] == "port: 9443"
    assert cand["fact"]["content"] == "The API listens on port 8080"  # the reviewer edits it
    assert cand["was"]["quote"] == "port: 8080"

    # Verifying again proposes nothing new: the same text is already pending.
    again = ok_json(capsys, "verify", "--all")
    assert again["banks"]["personal"]["proposed"] == []
    assert len(ok_json(capsys, "queue", "list")["candidates"]) == 1

    # Edit then accept: one supersede through the write path.
    done = ok_json(capsys, "queue", "accept", str(cand_id), "--reword",
                   "The API listens on port 9443")
    new = done["outcome"]["fact"]
    assert new["content"] == "The API listens on port 9443"
    assert new["quote"] == "port: 9443" and new["source"]["location"] == "deploy/api.yaml:5"
    assert new["fingerprint"]["line"] == 5
    old = ok_json(capsys, "history", str(port["id"]))
    assert old["fact"]["status"] == "superseded"
    assert old["fact"]["superseded_by"] == new["id"]
    assert old["fact"]["supersede_reason"] == f"source changed in {sha[:12]}"
    assert ok_json(capsys, "queue", "list")["candidates"] == []
    (decided,) = ok_json(capsys, "queue", "list", "--status", "accepted")["candidates"]
    assert decided["result_fact"] == new["id"] and decided["decision"] == "edited: content"

    # Accepting twice stores nothing twice.
    code, _, err = run(capsys, "queue", "accept", str(cand_id))
    assert code == 2 and "accepted, not pending" in err
    # The successor verifies fresh where it now stands.
    report = ok_json(capsys, "verify")
    assert [v["verdict"] for v in report["verdicts"]] == ["fresh"]


def test_a_rejected_text_is_not_proposed_again(env, capsys):
    workers = add_file_fact(capsys, "The API runs four workers", "deploy/api.yaml:5",
                            "workers: 4")
    commit_file(env.repo, "deploy/api.yaml", API_YAML.replace("workers: 4", "workers: 8"),
                "eight workers")
    (cand_id,) = ok_json(capsys, "verify")["banks"]["personal"]["proposed"]
    rejected = ok_json(capsys, "queue", "reject", str(cand_id), "--reason", "a load test")
    assert rejected["status"] == "rejected" and rejected["decision"] == "a load test"

    again = ok_json(capsys, "verify", "--all")
    assert again["banks"]["personal"]["proposed"] == []
    assert ok_json(capsys, "queue", "list")["candidates"] == []
    assert ok_json(capsys, "get", str(workers["id"]))["status"] == "stale"

    # Other text is another proposal.
    commit_file(env.repo, "deploy/api.yaml", API_YAML.replace("workers: 4", "workers: 16"),
                "sixteen")
    (other,) = ok_json(capsys, "verify", "--all")["banks"]["personal"]["proposed"]
    (cand,) = ok_json(capsys, "queue", "list")["candidates"]
    assert cand["id"] == other and cand["fact"]["quote"] == "workers: 16"


def test_a_line_that_cannot_be_identified_proposes_nothing(env, capsys):
    add_file_fact(capsys, "The API runs four workers", "deploy/api.yaml:5", "workers: 4")
    # The line is deleted: no line took its place, nothing is guessed.
    commit_file(env.repo, "deploy/api.yaml", API_YAML.replace("  workers: 4\n", ""), "drop")
    report = ok_json(capsys, "verify")
    assert [v["verdict"] for v in report["verdicts"]] == ["stale"]
    assert report["verdicts"][0]["successor"] is None
    assert report["banks"]["personal"]["proposed"] == []


def test_candidates_are_redacted_and_scoped(env, capsys):
    add_file_fact(capsys, "The deploy token is read from the environment", "deploy/api.yaml:5",
                  "workers: 4")
    commit_file(env.repo, "deploy/api.yaml",
                API_YAML.replace("workers: 4", f"token: {GITHUB}"), "oops")
    (cand_id,) = ok_json(capsys, "verify")["banks"]["personal"]["proposed"]
    listing = ok_json(capsys, "queue", "list")
    assert GITHUB not in str(listing)
    assert "[REDACTED" in listing["candidates"][0]["fact"]["quote"]

    # A queued correction goes through the write gate and its redaction too.
    fact = {"content": f"The deploy token is {GITHUB}", "category": "project",
            "source": {"kind": "user", "location": "user said"}, "quote": "it is in the env"}
    ro = httpx.Client(base_url=env.ingest, headers={"Authorization": f"Bearer {env.personal.ro}"})
    rw = httpx.Client(base_url=env.ingest, headers={"Authorization": f"Bearer {env.personal.rw}"})
    # A read token lists, and may neither queue, accept nor reject.
    assert ro.get("/v1/queue").status_code == 200
    assert ro.post("/v1/queue", json={"fact": fact}).status_code == 403
    assert ro.post(f"/v1/queue/{cand_id}/accept", json={}).status_code == 403
    assert ro.post(f"/v1/queue/{cand_id}/reject", json={}).status_code == 403
    r = rw.post("/v1/queue", json={"fact": fact, "reason": f"user said {GITHUB}"})
    assert r.status_code == 201, r.text
    assert GITHUB not in r.text and r.json()["kind"] == "correction"
    # Bad input: a clear 4xx naming the field, never a 500.
    r = rw.post("/v1/queue", json={"fact": {**fact, "category": "nope"}})
    assert r.status_code == 422 and "category" in r.text
    r = rw.post("/v1/queue", json={"fact": fact, "replaces": 999999})
    assert r.status_code == 404
    r = rw.post(f"/v1/queue/{cand_id}/accept", json={"edits": {"tags": "x"}})
    assert r.status_code == 400 and "tags" in r.text
    assert rw.post("/v1/queue/999999/reject", json={}).status_code == 404
    # Queued, not saved: the bank still holds only the stale fact.
    assert ok_json(capsys, "stats")["personal"]["facts"] == {"stale": 1}
