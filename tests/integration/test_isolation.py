"""Walk every route of both apps, from their own route tables, so a new route is covered.

For each route: no token -> 401; bank A's token on bank B's fact -> 403/404 and none of B's
content in the answer; a read-only token on a non-GET route -> 403. Routes with a body
declare an example in `opt={"example": ...}`; a route without one fails here on purpose.
"""

from __future__ import annotations

import json
import re

from litestar.routes import HTTPRoute

from tests.integration.conftest import auth, fact_body

SECRET_CONTENT = "Bank beta keeps its ledger on host zircon-7"


def _routes(app):
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            for method in handler.http_methods:
                if method in ("HEAD", "OPTIONS"):
                    continue
                yield route.path, method, handler


def _is_open(path: str) -> bool:
    return path in ("/healthz", "/readyz")


def _fill(path: str, fact_id: int, token_id: int, cand_id: int) -> str:
    """The path with bank B's ids: its token's for the admin token routes, its review-queue
    candidate's for the queue routes, else its fact's."""
    path = re.sub(r"\{token_id(:[a-z]+)?\}", str(token_id), path)
    path = re.sub(r"\{cand_id(:[a-z]+)?\}", str(cand_id), path)
    return re.sub(r"\{[a-z_]+(:[a-z]+)?\}", str(fact_id), path)


async def _call(client, method, path, handler, headers):
    example = handler.opt.get("example")
    kwargs = {"headers": headers}
    if method in ("POST", "PUT", "PATCH"):
        assert example is not None, f"{method} {path} must declare opt={{'example': ...}}"
        if isinstance(example, str):
            kwargs["content"] = example
        else:
            kwargs["json"] = example
    elif example is not None and method == "GET":
        kwargs["params"] = example
    return await client.request(method, path, **kwargs)


async def test_every_route_needs_a_token_and_keeps_banks_apart(stack, two_banks, conn):
    alpha, beta = two_banks
    beta_token = await conn.fetchval(
        "SELECT t.id FROM tokens t JOIN banks b ON b.id = t.bank_id WHERE b.name = 'beta' "
        "ORDER BY t.id LIMIT 1"
    )
    r = await stack.ingest.post("/v1/facts", json=fact_body(SECRET_CONTENT), headers=auth(beta.rw))
    assert r.status_code == 201, r.text
    beta_fact = r.json()["fact"]["id"]
    # Beta's review queue holds a candidate; alpha's own candidates (its POST /v1/queue below)
    # get other ids, so a 200 on beta's id is a leak, not alpha reading its own.
    r = await stack.ingest.post("/v1/queue", json={"fact": fact_body(SECRET_CONTENT + " (queued)"),
                                                   "reason": "zircon"}, headers=auth(beta.rw))
    assert r.status_code == 201, r.text
    beta_cand = r.json()["id"]
    # Beta's timeline (events, a conflict, a handoff) naming the secret host: no route may
    # show any of it to alpha.
    for session in ("beta-1", "beta-2"):
        r = await stack.ingest.post(
            "/v1/timeline/events",
            json={"events": [{"session_id": session, "kind": "file", "project":
                              "github.com/acme/api", "path": "src/zircon.py",
                              "command": None}]},
            headers=auth(beta.rw),
        )
        assert r.status_code == 201, r.text
    r = await stack.ingest.post(
        "/v1/handoffs", json={"text": SECRET_CONTENT, "project": "github.com/acme/api"},
        headers=auth(beta.rw),
    )
    assert r.status_code == 201, r.text
    walked = 0
    for client in (stack.ingest, stack.recall):
        for path, method, handler in _routes(client.app):
            if _is_open(path):
                continue
            if path.startswith("/schema"):
                # The OpenAPI document is an API route too: it needs a token.
                r = await client.get(path)
                assert r.status_code == 401, (path, r.status_code)
                continue
            url = _fill(path, beta_fact, beta_token, beta_cand)
            walked += 1
            r = await _call(client, method, url, handler, {})
            assert r.status_code == 401, (method, path, r.status_code, r.text)

            r = await _call(client, method, url, handler, auth(alpha.admin))
            assert SECRET_CONTENT not in r.text, (method, path)
            assert "zircon" not in r.text, (method, path)
            if "{" in path:
                assert r.status_code in (403, 404), (method, path, r.status_code, r.text)

            needs = {getattr(g, "func", g).__name__ for g in handler.resolve_guards()}
            if needs & {"requires_write", "requires_admin"}:
                r = await _call(client, method, url, handler, auth(alpha.ro))
                assert r.status_code == 403, (method, path, r.status_code, r.text)
            elif path == "/metrics":
                # The operator's route: no bank token, not even an admin's, reads it (the
                # counters span banks); it answered 401 to alpha's admin token above.
                assert needs == {"metrics_guard"}, (method, path, needs)
                assert r.status_code == 401, (method, path, r.status_code)
            else:  # every route is guarded: a route without a scope check is a bug
                assert needs == {"requires_read"}, (method, path, needs)
    assert walked >= 3
    # Bank beta's fact is untouched by everything alpha tried.
    r = await stack.ingest.get(f"/v1/facts/{beta_fact}", headers=auth(beta.ro))
    assert r.status_code == 200
    body = r.json()
    fact = body.get("fact", body)
    assert fact["content"] == SECRET_CONTENT
    assert fact["status"] == "active"
    # And so are beta's tokens: alpha's admin could neither rotate nor revoke one.
    assert await conn.fetchval(
        "SELECT count(*) FROM tokens t JOIN banks b ON b.id = t.bank_id "
        "WHERE b.name = 'beta' AND t.revoked_at IS NOT NULL"
    ) == 0


async def test_openapi_document_is_served_with_a_token(stack, two_banks):
    alpha, _ = two_banks
    for client in (stack.ingest, stack.recall):
        r = await client.get("/schema/openapi.json", headers=auth(alpha.ro))
        assert r.status_code == 200
        doc = json.loads(r.text)
        assert any(p.startswith("/v1/") for p in doc["paths"])


async def test_health_is_open(stack):
    for client in (stack.ingest, stack.recall):
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        r = await client.get("/readyz")
        assert r.status_code == 200 and r.json()["database"] == "ok"
