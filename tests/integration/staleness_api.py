"""Calls on the in-process stack (tests/integration/conftest.py `stack`) that the staleness
tests share: a file fact with its fingerprint in the project PROJECT, add, history, verify and
the inject block's ids."""

from __future__ import annotations

import hashlib

from tests.integration.conftest import auth, fact_body

PROJECT = "github.com/acme/api"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(path: str = "deploy/api.yaml", line: int = 12, quote: str = "port: 8080",
                **over) -> dict:
    fp = {"path": path, "line": line, "lines": 1, "quote_sha256": sha(quote),
          "file_blob": "a" * 40, "commit": "b" * 40, "dirty": False}
    fp.update(over)
    return fp


def file_fact(content: str, location: str, quote: str, **over) -> dict:
    path, _, line = location.partition(":")
    body = fact_body(content, source={"kind": "file", "location": location}, quote=quote,
                     project=PROJECT, fingerprint=fingerprint(path, int(line or 1), quote))
    body.update(over)
    return body


async def add(stack, token, body, status=201) -> dict:
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(token))
    assert r.status_code == status, r.text
    return r.json()


async def history(stack, token, fact_id) -> dict:
    r = await stack.ingest.get(f"/v1/facts/{fact_id}", headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()


async def verify(stack, token, results, project=PROJECT, status=200) -> dict:
    body = {"results": results}
    if project is not None:
        body["project"] = project
    r = await stack.ingest.post("/v1/facts/verify", json=body, headers=auth(token))
    assert r.status_code == status, r.text
    return r.json()


async def inject_ids(stack, token, session, prompt=None, project=PROJECT) -> dict:
    body = {"kind": "prompt" if prompt else "session", "session_id": session,
            "project": project}
    if prompt:
        body["prompt"] = prompt
    r = await stack.recall.post("/v1/inject", json=body, headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()
