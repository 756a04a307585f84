"""The class of item 4: a value the database cannot hold is a 4xx, never a 500, and
nothing is written. Both services' OpenAPI documents are walked, so a new route or parameter is
covered (or fails here until it has a valid body below): a NUL in every string field and
parameter, an integer beyond int64 in every integer field, id and cursor, and JSON nested
100,000 deep in every body."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import auth, fact_body

INT64_OVER = 2**63
NUL = "a\u0000b"
TABLES = ("facts", "fact_events", "fact_vectors", "audit_log", "embedding_cache", "categories")

FACT = {**fact_body(), "questions": ["Which port does the API use?"], "project": "p",
        "agent": "a"}
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/facts"): FACT,
    ("POST", "/v1/facts/import"): FACT,  # sent as JSONL
    ("POST", "/v1/facts/supersede"): {"fact": FACT, "replaces": [1], "reason": "moved"},
    ("POST", "/v1/facts/{fact_id}/confirm"): {
        "reason": "checked", "quote": "port: 8080", "location": "deploy/api.yaml:14",
        "fingerprint": {"path": "deploy/api.yaml", "line": 14, "lines": 1,
                        "quote_sha256": "0" * 64},
        "project": "p", "remotes": ["github.com/acme/api"],
    },
    ("POST", "/v1/facts/verify"): {"project": "p", "results": [
        {"id": 1, "verdict": "moved", "location": "deploy/api.yaml:20", "reason": "moved",
         "context": "20: port: 8080",
         "fingerprint": {"path": "deploy/api.yaml", "line": 20, "quote_sha256": "0" * 64}},
    ]},
    ("POST", "/v1/facts/check"): {"facts": [FACT]},
    ("POST", "/v1/facts/{fact_id}/dispute"): {"reason": "wrong"},
    ("PATCH", "/v1/facts/{fact_id}"): {"tags": ["a"], "category": "environment",
                                       "questions": ["q?"]},
    ("POST", "/v1/categories"): {"name": "runbooks", "description": "d"},
    ("POST", "/v1/search"): {"query": "port", "project": "p", "category": "environment"},
    ("POST", "/v1/inject"): {"kind": "prompt", "session_id": "s", "project": "p",
                             "prompt": "deploy the API"},
    ("POST", "/v1/timeline/events"): {"events": [
        {"session_id": "s", "kind": "session_start", "project": "p", "agent": "codex",
         "machine": "desk", "branch": "main", "cwd": "src"},
        {"session_id": "s", "kind": "file", "project": "p", "path": "src/app.py", "tool": "Edit"},
        {"session_id": "s", "kind": "command", "project": "p", "command": "make test",
         "exit_code": 0},
    ]},
    ("POST", "/v1/admin/tokens"): {"member": "ana", "scopes": ["read"], "label": "laptop"},
    ("POST", "/v1/admin/tokens/{token_id}/rotate"): {},
    ("POST", "/v1/admin/tokens/{token_id}/revoke"): {},
    ("POST", "/v1/queue"): {"fact": FACT, "replaces": 1, "reason": "the user said so"},
    ("POST", "/v1/queue/{cand_id}/accept"): {"edits": {"content": "c", "category": "environment",
                                                       "tags": ["a"], "questions": ["q?"]}},
    ("POST", "/v1/queue/{cand_id}/reject"): {"reason": "no"},
    ("POST", "/v1/handoffs"): {"text": "finish the retry work", "project": "p",
                               "to_agent": "codex", "files": ["src/retry.py"], "fact_ids": [1],
                               "session_id": "s", "agent": "pi"},
}


def operations(app: Any) -> Iterator[tuple[str, str, list[dict]]]:
    doc = app.openapi_schema.to_schema()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield method.upper(), path, op.get("parameters", [])


def mutations(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(where, mutated copy) for every string leaf (-> NUL) and int leaf or list (-> 2^63)."""
    if isinstance(value, str):
        yield path, NUL
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        yield path, INT64_OVER
    elif isinstance(value, dict):
        for k, v in value.items():
            for where, new in mutations(v, f"{path}.{k}"):
                out = copy.deepcopy(value)
                out[k] = new
                yield where, out
            if isinstance(v, list) and not v:
                out = copy.deepcopy(value)
                out[k] = [NUL]
                yield f"{path}.{k}[]", out
    elif isinstance(value, list):
        for i, v in enumerate(value):
            for where, new in mutations(v, f"{path}[{i}]"):
                out = copy.deepcopy(value)
                out[i] = new
                yield where, out


def fill(path: str, fact_id: int | str) -> str:
    return path.replace("{fact_id}", str(fact_id))


async def counts(conn) -> dict[str, int]:
    return {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES}


async def send(client, method: str, url: str, token: str, body: Any = None,
               raw: bytes | None = None, params: dict | None = None):
    headers = {**auth(token), "Content-Type": "application/json"}
    if raw is None and body is not None:
        raw = json.dumps(body).encode()
        if url.endswith("/import"):
            raw += b"\n"
    return await client.request(method, url, content=raw, headers=headers, params=params)


async def test_every_route_and_parameter_refuses_unstorable_values(stack, two_banks, conn):
    alpha, _ = two_banks
    # One real fact, so routes on an existing id reach their handler.
    r = await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    fact_id = r.json()["fact"]["id"]
    before = await counts(conn)
    seen: list[str] = []
    failures: list[str] = []

    async def expect_4xx(what: str, response) -> None:
        seen.append(what)
        if not 400 <= response.status_code < 500:
            failures.append(f"{what}: {response.status_code} {response.text[:200]}")

    for client in (stack.ingest, stack.recall):
        for method, path, params in operations(client.app):
            if path == "/metrics":
                continue
            body = BODIES.get((method, path))
            has_body = method in ("POST", "PATCH")
            assert not has_body or body is not None, f"add a valid body for {method} {path}"
            url = fill(path, fact_id)
            # Path ids and integer query parameters beyond int64; NUL in every string param.
            for p in params:
                if p["in"] == "path":
                    for bad in (str(INT64_OVER), str(-INT64_OVER - 1), "99999999999999999999999"):
                        await expect_4xx(f"{method} {path} {p['name']}={bad}", await send(
                            client, method, fill(path, bad), alpha.admin, body))
                elif p["in"] == "query":
                    bads = ([str(INT64_OVER), "1e20", "-1e30"]
                            if p["schema"].get("type") == "integer" else [NUL])
                    for bad in bads:
                        await expect_4xx(f"{method} {path} ?{p['name']}={bad!r}", await send(
                            client, method, url, alpha.admin, body, params={p["name"]: bad}))
            if not has_body:
                continue
            for where, mutated in mutations(body):
                await expect_4xx(f"{method} {path} body{where}", await send(
                    client, method, url, alpha.admin, mutated))
            deep = b"[" * 100_000 + b"]" * 100_000
            await expect_4xx(f"{method} {path} deep nesting", await send(
                client, method, url, alpha.admin, raw=deep))
            deep_obj = b'{"a":' * 50_000 + b"1" + b"}" * 50_000
            await expect_4xx(f"{method} {path} deep objects", await send(
                client, method, url, alpha.admin, raw=deep_obj))
    assert not failures, "\n".join(failures)
    assert len(seen) > 60, seen
    assert await counts(conn) == before, "a refused request wrote something"


async def test_min_version_header_beyond_int64_is_not_a_500(stack, two_banks):
    alpha, _ = two_banks
    r = await stack.recall.post("/v1/search", json={"query": "port"},
                                headers={**auth(alpha.ro), "X-Factbank-Min-Version": "9" * 30})
    assert r.status_code < 500, r.text


async def test_failed_import_writes_no_embedding_cache(stack, two_banks, conn):
    alpha, _ = two_banks
    good = json.dumps(fact_body("The worker listens on port 9090")).encode()
    for bad in (json.dumps(fact_body(quote=NUL)).encode(),
                json.dumps({**fact_body(), "category": "no-such-category"}).encode(),
                b"[" * 100_000):
        r = await stack.ingest.post("/v1/facts/import", content=good + b"\n" + bad + b"\n",
                                    headers=auth(alpha.rw))
        assert 400 <= r.status_code < 500, r.text
        assert await conn.fetchval("SELECT count(*) FROM embedding_cache") == 0
        assert await conn.fetchval("SELECT count(*) FROM facts") == 0


@pytest.mark.parametrize("url", ["/v1/facts/9223372036854775808", "/v1/facts?after=1e20"])
async def test_the_observed_examples(stack, two_banks, url):
    alpha, _ = two_banks
    client = stack.recall if "?" in url else stack.ingest
    r = await client.get(url, headers=auth(alpha.ro))
    assert r.status_code == 400, r.text
    assert "range" in r.json()["detail"]
