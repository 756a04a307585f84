"""Read-your-writes from the client side (`factbank_client.written`): a write's bank version
is remembered on this machine and sent to recall by every later read of the same bank, from
any process (the CLI, the MCP server, the prompt hook)."""

from __future__ import annotations

import json

import httpx
import pytest

from factbank_client import written
from factbank_client.client import Client
from factbank_client.config import ClientConfig


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_newest_version_per_url_and_bank_wins():
    assert written.seen("http://a:8701", "personal") is None
    written.remember("http://a:8701/", "personal", "7")
    written.remember("http://a:8701", "personal", 5)  # older: ignored
    written.remember("http://a:8701", "team", 9)
    written.remember("http://b:8701", "personal", 3)
    assert written.seen("http://a:8701", "personal") == 7
    assert written.headers("http://a:8701", "team") == {"X-Factbank-Min-Version": "9"}
    assert written.seen("http://b:8701", "personal") == 3


@pytest.mark.parametrize("junk", ["", "not json", "[1, 2]", '{"x": "7"}', '{"x": true}'])
def test_a_broken_file_is_no_freshness_demand_and_is_repaired(cache, junk):
    cache.joinpath("factbank").mkdir(parents=True)
    cache.joinpath("factbank", "written.json").write_text(junk)
    assert written.headers("http://a:8701", "personal") == {}
    written.remember("http://a:8701", "personal", 4)
    assert written.seen("http://a:8701", "personal") == 4


@pytest.mark.parametrize("bad", [None, "", "x", "-3", 0])
def test_a_missing_or_bad_version_header_is_ignored(bad):
    written.remember("http://a:8701", "personal", bad)
    assert written.seen("http://a:8701", "personal") is None


def test_the_client_sends_what_its_writes_returned():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.port == 8701:
            return httpx.Response(201, json={"fact": {"id": 1}, "outcome": "stored"},
                                  headers={"X-Factbank-Version": "42"})
        return httpx.Response(200, json={"results": [], "query": "q"})

    config = ClientConfig("http://127.0.0.1:8701", tokens={"personal": "fb_x"})
    with Client(config, http=httpx.Client(transport=httpx.MockTransport(handler))) as client:
        client.request("POST", client_mod().RECALL, "/v1/search", "personal", json_body={})
        assert "x-factbank-min-version" not in seen[-1].headers  # nothing written yet
        client.request("POST", client_mod().INGEST, "/v1/facts", "personal", json_body={})
        client.request("POST", client_mod().RECALL, "/v1/search", "personal", json_body={})
    assert seen[-1].headers["x-factbank-min-version"] == "42"
    stored = json.loads(open(written.path()).read())
    assert stored == {"http://127.0.0.1:8701 personal": 42}


def client_mod():
    from factbank_client import client

    return client
