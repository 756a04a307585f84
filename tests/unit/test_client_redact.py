"""The client keeps no secret the server would have redacted.

`factbank dispatch claude "deploy using <secrets>"` left 12 of 15 secret kinds verbatim in the
run files and on the dashboard's dispatch page: the client had its own, weaker redaction. Now
the client's redaction is the server's (in-process when the server extra is installed, which
it is here) or a strict fallback (the light client), and the dispatch store redacts every
string it writes. Tested: the client's result equals the server's on both secret corpora; the
fallback removes every kind below; 21 kinds through a real dispatch (supervisor, stand-in
harness) leave no trace in the run files, the log, the record or the dashboard's page.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from factbank.redact.redaction import redact_text
from factbank_client import redact as client_redact
from factbank_client.config import ClientConfig
from factbank_client.dashboard import app as dashboard_app
from factbank_client.dashboard import security
from factbank_client.dispatch import RunStore, handoff_text, start
from factbank_evals.redaction_recall import load
from tests.unit.secret_kinds import KINDS

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dispatch"
SESSION = "25fba946-2f28-489a-8e1b-8c88e326319a"


@pytest.fixture(autouse=True)
def no_login(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("FACTBANK_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("FACTBANK_TOKEN", raising=False)
    monkeypatch.delenv("FACTBANK_TEAM_TOKEN", raising=False)
    client_redact.server_redaction.cache_clear()
    yield
    client_redact.server_redaction.cache_clear()


@pytest.fixture(params=["server", "fallback"])
def mode(request, monkeypatch) -> str:
    """Both of the client's redactions: the server's in-process, and the light client's."""
    if request.param == "fallback":
        monkeypatch.setenv("FACTBANK_CLIENT_REDACTION", "fallback")
    else:
        monkeypatch.delenv("FACTBANK_CLIENT_REDACTION", raising=False)
    client_redact.server_redaction.cache_clear()
    return request.param


def test_the_client_redacts_exactly_as_the_server_on_both_corpora():
    rows = load()
    assert len(rows) > 2000
    differ = [r["id"] for r in rows if client_redact.redact(r["text"]) !=
              redact_text(r["text"], "dispatch")[0]]
    assert differ == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_removed_by_either_redaction(kind, mode):
    text, secret = KINDS[kind]
    out = client_redact.redact(f"deploy using {text} today")
    assert not any(line in out for line in secret.splitlines()), out


def test_the_fallback_keeps_plain_prose_and_removes_introduced_values(monkeypatch):
    fb = client_redact.fallback
    for text in ("the password policy is documented in SECURITY.md",
                 "token bucket rate limit is 100/s", "the token is expired",
                 "ran pytest -q: 12 passed", "store it in ${DB_PASSWORD}"):
        assert fb(text) == text
    assert fb("password: hunter2x") == "password: [REDACTED:assignment]"


def _stream(secrets: str) -> str:
    """A Claude Code stream whose command, its output, a message and the result all repeat
    the secrets (an agent that echoes what it was given)."""
    def line(obj: dict) -> str:
        return json.dumps({**obj, "session_id": SESSION}) + "\n"

    return "".join([
        line({"type": "system", "subtype": "init", "cwd": "/tmp", "tools": []}),
        line({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash",
             "input": {"command": f"echo '{secrets}'"}}]}}),
        line({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": "t1", "type": "tool_result", "content": secrets,
             "is_error": True}]}}),
        line({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"I used {secrets}"}]}}),
        line({"type": "result", "subtype": "error_during_execution", "is_error": True,
              "result": f"failed with {secrets}"}),
    ])


async def _dispatch_page(runs: Path, run_id: str) -> str:
    keys = security.Secrets()
    gate = dashboard_app.create(ClientConfig(url="http://127.0.0.1:9", tokens={}), keys, 0,
                                dispatch_dir=runs)
    transport = httpx.ASGITransport(app=gate)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:0") as http:
        r = await http.get(f"/dispatch?token={keys.launch}")
        assert r.status_code == 303
        http.cookies.set(security.COOKIE, keys.session)
        r = await http.get(f"/dispatch?run={run_id}")
        assert r.status_code == 200, r.text
        return r.text


def test_a_dispatch_keeps_no_secret_in_its_files_log_or_page(tmp_path, mode):
    secrets = " ".join(text for text, _ in KINDS.values())
    stream = tmp_path / "stream.jsonl"
    stream.write_text(_stream(secrets))
    harness = tmp_path / "fake-claude"
    harness.write_text(f"#!/bin/sh\necho '{KINDS['github_token'][0]}' >&2\n"
                       f"exec {sys.executable} {FIXTURES / 'replay.py'} \"$@\"\n")
    harness.chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    store = RunStore(tmp_path / "runs")
    env = {"PATH": os.environ["PATH"], "REPLAY_FILE": str(stream),
           "FACTBANK_CONFIG": os.environ["FACTBANK_CONFIG"]}
    if mode == "fallback":
        env["FACTBANK_CLIENT_REDACTION"] = "fallback"
    run = start(store, "claude", f"deploy using {secrets}", repo, env=env,
                binaries={"claude": str(harness)})
    import time

    end = time.monotonic() + 60
    while not ((done := store.get(run.id)) and done.finished) and time.monotonic() < end:
        time.sleep(0.1)
    assert done is not None and done.finished, done
    events = store.events(run.id)
    assert {e.kind for e in events} >= {"command", "message", "stderr"}, events
    page = asyncio.run(_dispatch_page(store.path, run.id))
    shown = {"run files": "".join(f.read_text("utf-8", "replace")
                                  for f in store.run_dir(run.id).iterdir() if f.is_file()),
             "record": json.dumps(done.to_dict(), ensure_ascii=False),
             "returned run": json.dumps(run.to_dict(), ensure_ascii=False),
             "log": json.dumps([e.to_dict() for e in events], ensure_ascii=False),
             "page": page, "handoff": handoff_text(done)}
    for kind, (_, secret) in KINDS.items():
        for where, text in shown.items():
            for part in secret.splitlines():
                assert part not in text, f"{kind} in the {where} ({mode})"
    assert "[REDACTED:" in shown["run files"] and "[REDACTED:" in page
