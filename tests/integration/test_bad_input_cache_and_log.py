"""Bad input that once got through: the result-cache key is unambiguous (a read-only member
cannot blank the owner's results with `category: "None"`), and the access log records the
status sent."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from factbank.observability import JsonFormatter
from factbank.read.cache import digest
from tests.integration.conftest import auth, fact_body


def test_digest_keeps_types_and_boundaries():
    assert digest("q", None) != digest("q", "None")
    assert digest(1) != digest("1") != digest(1.0)
    assert digest(True) != digest("True")
    assert digest("a\x1fb") != digest("a", "b")
    assert digest("a", "") != digest("a")
    assert digest(["a", "b"]) != digest("a", "b")



def test_digest_is_the_same_in_every_process():
    """Recall replicas share Redis: a key must not depend on the process (hash seed)."""
    code = "from factbank.read.cache import digest; print(digest('q', None, 1, ['a']))"
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == digest("q", None, 1, ["a"]), f"PYTHONHASHSEED={seed}"


async def test_category_none_string_does_not_blank_the_owners_results(stack, two_banks):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    query = {"query": "which port does the API listen on"}
    r = await stack.recall.post("/v1/search", json={**query, "category": "None"},
                                headers=auth(alpha.ro))
    assert r.status_code == 200 and r.json()["results"] == []
    r = await stack.recall.post("/v1/search", json=query, headers=auth(alpha.rw))
    assert r.status_code == 200
    assert not r.json()["cached"]
    assert r.json()["results"], r.text


async def test_access_log_records_401_as_401(stack, two_banks, caplog):
    with caplog.at_level(logging.INFO, logger="factbank.access"):
        for client, path in ((stack.ingest, "/v1/facts/1"), (stack.recall, "/v1/stats")):
            r = await client.get(path)
            assert r.status_code == 401
            r = await client.get(path, headers=auth("fb_not_a_token"))
            assert r.status_code == 401
    access = [json.loads(JsonFormatter().format(r)) for r in caplog.records
              if r.name == "factbank.access"]
    statuses = [a["status"] for a in access]
    assert statuses == [401, 401, 401, 401], access
