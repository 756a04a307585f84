"""The class of item 1: a secret sent in ANY string a write route takes never lands
in clear. Both services' OpenAPI documents are walked, so a new route, field, parameter or
header is covered: a secret is planted in every string field of every body, every query
parameter and the X-Factbank-Agent header of every route; then every table of the schema is
dumped as text, and so are the responses, the export, the history of every fact, injection
blocks and the captured logs, and no secret may be found in any of them.

With the `reject` policy, a secret in a field the gate does not see (tags and questions edited
by PATCH, reasons, a fact's project, a category's description) is a 4xx naming the field."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from factbank.observability import JsonFormatter
from factbank.redact import redaction
from factbank.store import banks
from tests.integration.conftest import auth, fact_body
from tests.integration.secrets_probe import (
    AWS,
    GITHUB,
    PASSWORD,
    SECRETS,
    dump_tables,
    leaks,
    plantings,
)

# Three families, each recognised on its own: a provider key id, a provider token, a named
# password. What is searched for is the part that must never appear.

FACT = {
    **fact_body("The service listens on port 8080"),
    "questions": ["Which port does the service use?"],
    "project": "proj",
    "agent": "codex",
}
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/facts"): FACT,
    # Sent as JSONL; `restore` is what an exported fact carries back.
    ("POST", "/v1/facts/import"): {
        **FACT,
        "restore": {"id": 1, "status": "active", "trust": 0.5, "supersede_reason": "moved"},
    },
    ("POST", "/v1/facts/supersede"): {"fact": FACT, "replaces": ["{fact_id}"], "reason": "moved"},
    ("POST", "/v1/facts/{fact_id}/confirm"): {
        "reason": "checked", "quote": "port: 8080", "location": "deploy/api.yaml:14",
        "fingerprint": {"path": "deploy/api.yaml", "line": 14, "quote_sha256": "0" * 64},
        "project": "proj", "remotes": ["github.com/acme/api"],
    },
    # The facts `Fresh` makes are of project "proj", so the batch applies.
    ("POST", "/v1/facts/verify"): {"project": "proj", "results": [
        {"id": "{fact_id}", "verdict": "stale", "location": "deploy/api.yaml:20",
         "reason": "the quote is gone", "context": "12: port: 9090",
         "fingerprint": {"path": "deploy/api.yaml", "line": 20, "quote_sha256": "0" * 64},
         # the review queue's successor: its quote, location and path are stored
         "successor": {"quote": "port: 9090", "location": "deploy/api.yaml:12",
                       "fingerprint": {"path": "deploy/api.yaml", "line": 12,
                                       "quote_sha256": "0" * 64},
                       "commit": "abc1234"}},
    ]},
    ("POST", "/v1/queue"): {"fact": FACT, "replaces": "{fact_id}", "reason": "the user said so"},
    ("POST", "/v1/queue/{cand_id}/accept"): {"edits": {"content": "c", "tags": ["a"],
                                                       "questions": ["q?"]}},
    ("POST", "/v1/queue/{cand_id}/reject"): {"reason": "no"},
    ("POST", "/v1/facts/check"): {"facts": [FACT]},
    ("POST", "/v1/facts/{fact_id}/dispute"): {"reason": "wrong"},
    ("PATCH", "/v1/facts/{fact_id}"): {
        "tags": ["a"],
        "category": "environment",
        "questions": ["Which port?"],
    },
    ("POST", "/v1/categories"): {"name": "runbooks", "description": "how to run things"},
    ("POST", "/v1/search"): {"query": "port", "project": "proj", "category": "environment"},
    ("POST", "/v1/inject"): {
        "kind": "prompt",
        "session_id": "s",
        "project": "proj",
        "prompt": "which port does the service use",
    },
    ("POST", "/v1/timeline/events"): {
        "events": [
            {"session_id": "s-plant", "kind": "session_start", "project": "proj",
             "agent": "codex", "machine": "desk", "branch": "main", "cwd": "src"},
            {"session_id": "s-plant", "kind": "file", "project": "proj", "path": "src/app.py",
             "tool": "Edit"},
            {"session_id": "s-plant", "kind": "command", "project": "proj",
             "command": "make test", "exit_code": 0},
        ]
    },
    # The admin routes: a member name holding a secret is refused naming the
    # field, a label is redacted; rotate and revoke take no body.
    ("POST", "/v1/admin/tokens"): {"member": "ana", "scopes": ["read"], "label": "laptop"},
    ("POST", "/v1/admin/tokens/{token_id}/rotate"): {},
    ("POST", "/v1/admin/tokens/{token_id}/revoke"): {},
    ("POST", "/v1/handoffs"): {
        "text": "finish the retry work", "project": "proj", "to_agent": "codex",
        "to_member": "alice", "files": ["src/retry.py"], "session_id": "s-h", "agent": "pi",
    },
}


def operations(app: Any) -> Iterator[tuple[str, str, list[dict]]]:
    doc = app.openapi_schema.to_schema()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield method.upper(), path, op.get("parameters", [])


def with_id(value: Any, fact_id: int) -> Any:
    if value == "{fact_id}":
        return fact_id
    if isinstance(value, dict):
        return {k: with_id(v, fact_id) for k, v in value.items()}
    if isinstance(value, list):
        return [with_id(v, fact_id) for v in value]
    return value


class Fresh:
    """A new fact for each request that retires, edits or judges one (unique content)."""

    def __init__(self, stack, token: str) -> None:
        self.stack, self.token, self.n = stack, token, 0

    async def __call__(self) -> int:
        self.n += 1
        body = fact_body(
            f"Worker pool {self.n} runs on host w{self.n}.internal",
            quote=f"host: w{self.n}.internal",
            project="proj",  # what the verify body names
        )
        r = await self.stack.ingest.post("/v1/facts", json=body, headers=auth(self.token))
        assert r.status_code == 201, r.text
        return r.json()["fact"]["id"]


async def test_no_secret_planted_anywhere_lands_anywhere(stack, two_banks, conn, caplog):
    alpha, _ = two_banks
    fresh = Fresh(stack, alpha.admin)
    responses: list[str] = []
    sent: list[str] = []
    statuses: dict[int, int] = {}

    async def send(client, method, path, body=None, params=None, agent=None):
        fact_id = await fresh() if "{fact_id}" in path or "{fact_id}" in json.dumps(body) else 0
        url = path.replace("{fact_id}", str(fact_id))
        headers = {**auth(alpha.admin), "Content-Type": "application/json"}
        if agent is not None:
            headers["X-Factbank-Agent"] = agent.encode()  # UTF-8, as a harness sends it
        raw = None
        if body is not None:
            body = with_id(body, fact_id)
            if body.get("name") == "runbooks":  # a new category each time, not a 409
                body = {**body, "name": f"runbooks-{len(sent)}"}
            raw = json.dumps(body, ensure_ascii=False).encode()
            if path.endswith("/import"):
                raw += b"\n"
        r = await client.request(method, url, content=raw, headers=headers, params=params)
        sent.append(f"{method} {path}")
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code < 500, f"{method} {path}: {r.status_code} {r.text[:300]}"
        responses.append(f"{method} {path} {r.status_code} {r.text}")

    with caplog.at_level(logging.DEBUG):
        for client in (stack.ingest, stack.recall):
            for method, path, params in operations(client.app):
                if path == "/metrics":
                    continue
                body = BODIES.get((method, path))
                assert method not in ("POST", "PATCH", "PUT") or body is not None, (
                    f"add a valid body for {method} {path}"
                )
                for planted in SECRETS:
                    # The agent header, on every route.
                    await send(client, method, path, body, agent=planted)
                    # Every query parameter.
                    for p in params:
                        if p["in"] == "query" and p["schema"].get("type") != "integer":
                            await send(client, method, path, body, params={p["name"]: planted})
                    # Every string in the body, and one more item in every list of strings.
                    if body is not None:
                        for _where, mutated in plantings(body, planted):
                            await send(client, method, path, mutated)
        # Injection that surfaces the superseded facts' notes, and every read view.
        reads = [
            await stack.recall.get("/v1/export", headers=auth(alpha.ro)),
            await stack.recall.get(
                "/v1/facts", params={"status": "superseded", "limit": 1000},
                headers=auth(alpha.ro),
            ),
            await stack.recall.get("/v1/categories", headers=auth(alpha.ro)),
            await stack.recall.get("/v1/stats", headers=auth(alpha.ro)),
        ]
        for n in range(1, fresh.n + 1):
            prompt = f"which host does worker pool {n} run on"
            reads.append(await stack.recall.post(
                "/v1/inject",
                json={"kind": "prompt", "session_id": f"probe{n}", "prompt": prompt},
                headers=auth(alpha.ro),
            ))
            reads.append(await stack.recall.post(
                "/v1/search", json={"query": prompt}, headers=auth(alpha.ro)
            ))
        for fact_id in await conn.fetch("SELECT id FROM facts"):
            reads.append(await stack.ingest.get(
                f"/v1/facts/{fact_id['id']}", headers=auth(alpha.ro)
            ))
        # The services' logs (httpx's are this test's own client, printing the URL it sent).
        logs = "\n".join(
            JsonFormatter().format(r) for r in caplog.records if r.name != "httpx"
        )

    injected = [r.json()["text"] for r in reads if r.request.url.path == "/v1/inject"]
    assert any("[supersedes #" in t for t in injected), "no injection showed a supersede note"
    assert len(sent) > 150, len(sent)
    # The planted secrets were accepted, not only refused: facts were written with them.
    assert statuses.get(201, 0) + statuses.get(200, 0) > 60, statuses

    found: list[str] = []
    for name, text in (await dump_tables(conn)).items():
        found += [f"table {name}: {s}" for s in leaks(text)]
    for text in responses:
        found += [f"response {text[:120]}: {s}" for s in leaks(text)]
    for r in reads:
        found += [f"read {r.request.url}: {s}" for s in leaks(r.text)]
    found += [f"logs: {s}" for s in leaks(logs)]
    assert not found, "\n".join(sorted(set(found))[:60])
    # Something was redacted where the gate never looked, so the check above is not vacuous.
    events = await conn.fetchval("SELECT string_agg(reason || agent, ' ') FROM fact_events")
    assert "[REDACTED:" in events
    assert await conn.fetchval("SELECT count(*) FROM facts WHERE project LIKE '%[REDACTED:%'")
    assert await conn.fetchval(
        "SELECT count(*) FROM facts WHERE created_by_agent LIKE '%[REDACTED:%'"
    )
    assert await conn.fetchval(
        "SELECT count(*) FROM facts WHERE supersede_reason LIKE '%[REDACTED:%'"
    )
    assert await conn.fetchval(
        "SELECT count(*) FROM categories WHERE description LIKE '%[REDACTED:%'"
    )
    # Staleness's strings: a stale reason and context (verify), a confirm's remotes and project,
    # a refreshed quote and location.
    for sql in (
        "SELECT count(*) FROM facts WHERE stale_reason LIKE '%[REDACTED:%'",
        "SELECT count(*) FROM facts WHERE stale_context LIKE '%[REDACTED:%'",
        "SELECT count(*) FROM fact_events WHERE remotes::text LIKE '%[REDACTED:%'",
        "SELECT count(*) FROM fact_events WHERE kind = 'confirmed' AND project LIKE '%[REDACTED:%'",
        "SELECT count(*) FROM facts WHERE source_location LIKE 'deploy/api.yaml:14%' "
        "AND quote LIKE '%[REDACTED:%'",
        # The review queue: a successor's quote and location, a queued correction's reason.
        "SELECT count(*) FROM candidates WHERE kind = 'successor' "
        "AND fact->>'quote' LIKE '%[REDACTED:%'",
        "SELECT count(*) FROM candidates WHERE kind = 'successor' "
        "AND fact->'source'->>'location' LIKE '%[REDACTED:%'",
        "SELECT count(*) FROM candidates WHERE kind = 'correction' AND reason LIKE '%[REDACTED:%'",
    ):
        assert await conn.fetchval(sql), sql


@pytest.fixture
async def strict_bank(conn, two_banks):
    alpha, _ = two_banks
    await banks.set_redaction_policy(conn, alpha.name, "reject")
    return alpha


@pytest.mark.parametrize(
    ("method", "path", "body", "params", "field"),
    [
        ("PATCH", "/v1/facts/{id}", {"tags": ["api", AWS]}, None, "tags[1]"),
        ("PATCH", "/v1/facts/{id}", {"questions": [f"Is {GITHUB} the token?"]}, None,
         "questions[0]"),
        ("POST", "/v1/facts/{id}/dispute", {"reason": f"password = {PASSWORD}"}, None, "reason"),
        ("POST", "/v1/facts/{id}/confirm", {"reason": f"key {AWS}"}, None, "reason"),
        ("DELETE", "/v1/facts/{id}", None, {"reason": f"password = {PASSWORD}"}, "reason"),
        ("POST", "/v1/facts/supersede",
         {"fact": fact_body("The API listens on port 8443"), "replaces": ["{id}"],
          "reason": f"moved; admin password = {PASSWORD}"}, None, "reason"),
        ("POST", "/v1/facts", {**fact_body("The API runs on k8s"), "project": AWS}, None,
         "project"),
        ("POST", "/v1/facts", {**fact_body("The API runs on k8s"), "agent": GITHUB}, None,
         "agent"),
        ("POST", "/v1/categories", {"name": "ops", "description": f"token {GITHUB}"}, None,
         "description"),
    ],
)


async def test_reject_policy_refuses_every_field_naming_it(
    stack, strict_bank, conn, method, path, body, params, field
):
    r = await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(strict_bank.rw))
    fact_id = r.json()["fact"]["id"]
    before = await dump_tables(conn)
    url = path.replace("{id}", str(fact_id))
    raw = json.dumps(with_id(body, fact_id)).replace('"{id}"', str(fact_id)) if body else None
    if raw:
        raw = raw.replace('"{fact_id}"', str(fact_id))
    r = await stack.ingest.request(
        method, url, content=raw, params=params,
        headers={**auth(strict_bank.rw), "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert field in {reason["field"] for reason in r.json()["reasons"]}, r.text
    assert not leaks(r.text)
    after = await dump_tables(conn)
    assert {k: v for k, v in after.items() if k != "tokens"} == {
        k: v for k, v in before.items() if k != "tokens"
    }, "a refused request wrote something"


async def test_reject_policy_refuses_a_secret_agent_header(stack, strict_bank):
    r = await stack.ingest.post(
        "/v1/facts", json=fact_body(),
        headers={**auth(strict_bank.rw), "X-Factbank-Agent": GITHUB},
    )
    assert r.status_code == 422, r.text
    assert "X-Factbank-Agent" in {reason["field"] for reason in r.json()["reasons"]}


async def test_member_names_and_token_labels_hold_no_secret(conn, two_banks):
    alpha, _ = two_banks
    with pytest.raises(ValueError, match="secret"):
        await banks.add_member(conn, alpha.name, AWS)
    info, _ = await banks.issue_token(conn, alpha.name, "bob", "read", f"password = {PASSWORD}")
    assert PASSWORD not in info.label
    text = "\n".join((await dump_tables(conn)).values())
    assert not leaks(text)


def test_the_helper_redacts_or_refuses():
    from factbank.errors import Refused

    assert AWS not in redaction.clean_text("reason", f"moved; key {AWS}")
    with pytest.raises(Refused) as exc:
        redaction.clean_text("reason", f"moved; key {AWS}", "reject")
    assert exc.value.reasons[0]["field"] == "reason"
    value = {"a": [f"x {GITHUB}", 3], f"password = {PASSWORD}": None}
    assert not leaks(json.dumps(redaction.clean_value(value)))
    clean = {"a": ["plain"], "b": 1}
    assert redaction.clean_value(clean) is clean


async def test_purge_removes_a_secret_redaction_missed_and_the_audit_keeps_no_words(
    stack, two_banks, conn
):
    """The README's procedure: a secret no rule knows (a short door code) typed into a fact,
    its tags, questions and reasons, then purged: it is nowhere; the audit log keeps only ids,
    kinds and hashes."""
    alpha, _ = two_banks
    code = "door code Zq7-Lm3"
    body = fact_body(f"The server room {code}", quote=code, tags=["Zq7-Lm3"],
                     questions=[f"What is the {code}?"])
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    fid = r.json()["fact"]["id"]
    for verb, reason in (("confirm", f"checked {code}"), ("dispute", f"not {code}")):
        r = await stack.ingest.post(f"/v1/facts/{fid}/{verb}", json={"reason": reason},
                                    headers=auth(alpha.rw))
        assert r.status_code == 200, r.text
    r = await stack.ingest.delete(f"/v1/facts/{fid}", params={"reason": f"leaked {code}"},
                                  headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    assert "Zq7-Lm3" in "\n".join((await dump_tables(conn)).values())
    r = await stack.ingest.delete(f"/v1/facts/{fid}/purge", headers=auth(alpha.admin))
    assert r.status_code == 200, r.text
    tables = await dump_tables(conn)
    assert not [name for name, text in tables.items() if "Zq7-Lm3" in text]
    kept = await conn.fetch("SELECT action, detail::text FROM audit_log WHERE target = $1",
                            str(fid))
    assert {k["action"] for k in kept} >= {"fact.stored", "fact.delete", "fact.purge"}
    assert "reason_sha256" in next(k["detail"] for k in kept if k["action"] == "fact.delete")
