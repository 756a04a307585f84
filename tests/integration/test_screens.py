"""What the screens say, each as it was observed on the first day:

- `confirm` on a superseded fact raised its trust and said nothing of its successor;
- `get` of a stale fact did not say why it is stale;
- every fact said "confirmed <its creation time>";
- the timeline's WHAT column said "handoff #1" without its text;
- `search` printed "(below the gate)" rows although its help says they are not hits;
- the dashboard read the config only at launch (a bank logged in later answered 404) and
  showed "No facts match" under a services-down error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx

from factbank.runtime.runner import free_port, serve_apps_in_thread
from factbank_client import config as client_config
from factbank_client.client import Client
from factbank_client.dashboard import app as dashboard_app
from factbank_client.dashboard import security
from tests.integration import cli_env
from tests.integration.cli_env import ADD_PNPM, Env, login, ok, ok_json, run

env = cli_env.env  # both services on free ports, a repo, banks alice (personal), acme (team)

PORT = ("add", "The API listens on port 8080", "--category", "environment", "--source",
        "deploy/api.yaml:4", "--quote", "port:   8080", "--origin", "verified", "--tag", "api")


def supersede(capsys, fid: int, content: str, quote: str, reason: str) -> int:
    return ok_json(capsys, "supersede", str(fid), "--reason", reason, "--content", content,
                   "--source-kind", "user", "--quote", quote)["fact"]["id"]


def test_confirm_of_a_superseded_fact_names_the_current_one_and_changes_nothing(env, capsys):
    login(capsys, env)
    first = ok_json(capsys, *PORT)["fact"]["id"]
    second = supersede(capsys, first, "The API listens on port 8081", "port 8081",
                       "moved in the compose change")
    third = supersede(capsys, second, "The API listens on port 8443", "port 8443",
                      "moved behind TLS")
    for old, successor in ((first, second), (second, third)):
        before = ok_json(capsys, "get", str(old))
        code, out, err = run(capsys, "confirm", str(old), "--reason", "still true?")
        assert code == 2 and out == "", (out, err)
        assert f"superseded by #{successor}" in err and f"current fact is #{third}" in err
        assert "port 8443" in err and f"Confirm #{third}" in err
        after = ok_json(capsys, "get", str(old))
        assert after["trust"] == before["trust"] and after["confirmed_at"] == before[
            "confirmed_at"]
        kinds = [e["kind"] for e in ok_json(capsys, "history", str(old))["events"]]
        assert "confirmed" not in kinds
    assert ok(capsys, "confirm", str(third), "--reason", "checked").startswith("confirmed")


def test_get_says_why_a_fact_is_stale_and_confirmed_only_when_it_was(env, capsys):
    login(capsys, env)
    fid = ok_json(capsys, *PORT)["fact"]["id"]
    out = ok(capsys, "get", str(fid))
    assert "never confirmed" in out and "confirmed 20" not in out
    ok(capsys, "confirm", str(fid), "--reason", "read deploy/api.yaml")
    out = ok(capsys, "get", str(fid))
    assert "never confirmed" not in out and ", confirmed 20" in out

    with Client(env.config()) as client:
        client.verify([{"id": fid, "verdict": "stale",
                        "reason": "the quote is gone from deploy/api.yaml:4",
                        "context": "3:   host: 0.0.0.0\n4:   port: 9090"}],
                      project=env.project)
    out = ok(capsys, "get", str(fid))
    assert f"#{fid}  stale" in out
    assert "stale since 20" in out and "the quote is gone from deploy/api.yaml:4" in out
    assert "4:   port: 9090" in out and f"factbank confirm {fid} --quote" in out
    # The agent's `get` (the MCP text) says it too.
    from factbank_client import render

    with Client(env.config()) as client:
        text = render.history_text(client.history(fid))
    assert "stale since" in text and "the quote is gone" in text


def test_the_timeline_shows_what_a_handoff_says(env, capsys):
    login(capsys, env)
    ok(capsys, "handoff", "Retry refactor half done; tests/test_retry.py still fails")
    out = ok(capsys, "timeline")
    assert "handoff #1 (open): Retry refactor half done; tests/test_retry.py still fails" \
        in out, out
    with Client(env.config(), agent="codex") as client:
        client.inject("session", "s-next", project=env.project)
    assert "handoff #1 (delivered): Retry refactor" in ok(capsys, "timeline")


def test_search_shows_below_the_gate_rows_only_with_related(env, capsys, monkeypatch):
    from factbank.read import fusion

    login(capsys, env)
    ok(capsys, *ADD_PNPM)
    ok(capsys, "add", "The CI runners are on host ci-02", "--category", "environment",
       "--source-kind", "user", "--quote", "ci-02", "--tag", "ci", "--global")
    monkeypatch.setattr(fusion, "companion_floor", lambda params=fusion.DEFAULT: 0.0)
    query = ("search", "which package manager do we use, pnpm or npm?")
    related = ok_json(capsys, *query, "--related")["results"]
    assert any(r.get("companion") for r in related) and not related[0].get("companion")
    hits = ok_json(capsys, *query)["results"]
    assert hits and not any(r.get("companion") for r in hits)
    assert len(hits) < len(related)
    assert "(below the gate)" not in ok(capsys, *query)
    assert "(below the gate)" in ok(capsys, *query, "--related")


@contextlib.contextmanager
def dashboard(env: Env) -> Iterator[httpx.Client]:
    """The dashboard over the env's config FILE (so a later login reaches it), and an HTTP
    client holding its cookie."""
    keys = security.Secrets()
    port = free_port()
    gate = dashboard_app.create(client_config.load(env.config_path), keys, port)
    with serve_apps_in_thread({"dashboard": gate}) as urls:
        url = urls["dashboard"]
        gate.hosts = security.allowed_hosts(int(url.rsplit(":", 1)[1]))
        with httpx.Client(base_url=url, follow_redirects=True, timeout=30) as http:
            assert http.get(f"/facts?token={keys.launch}").status_code == 200
            yield http


def test_the_dashboard_sees_a_bank_logged_in_after_it_started(env, capsys):
    login(capsys, env)  # personal only, before the dashboard starts
    with dashboard(env) as http:
        assert http.get("/facts?bank=team").status_code == 404
        login(capsys, env, team=True)
        ok(capsys, "add", "We chose litestar", "--category", "decisions", "--source-kind",
           "user", "--quote", "we chose litestar", "--tag", "litestar", "--bank", "team")
        page = http.get("/facts?bank=team")
        assert page.status_code == 200 and "We chose litestar" in page.text


def test_the_dashboard_shows_only_the_error_when_the_services_are_down(env, capsys):
    dead = f"http://127.0.0.1:{free_port()}"
    client_config.save_login(dead, env.personal.rw, recall_url=dead, path=env.config_path)
    with dashboard(env) as http:
        for path in ("/facts", "/facts?q=port", "/timeline"):
            page = http.get(path)
            assert page.status_code == 200, path
            assert 'class="flash bad"' in page.text, path
            for claim in ("No facts match", "Nothing cleared the recall gate",
                          "Nothing on the timeline yet", "No open handoff"):
                assert claim not in page.text, (path, claim)
