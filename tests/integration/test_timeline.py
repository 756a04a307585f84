"""The timeline end to end: events, conflicts and their window edges, handoffs
delivered once, the session briefing, redaction, scopes, bank isolation and retention."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from factbank.store import banks
from factbank.timeline import events
from factbank_client.client import Client
from tests.integration.cli_env import env as cli_env  # noqa: F401 (the env fixture)
from tests.integration.cli_env import login, ok, run
from tests.integration.conftest import auth, fact_body, make_bank
from tests.integration.timeline_events import PROJECT, ev, iso, post_events

GITHUB = "ghp_R7mK2xQ9vL4pT8wN3jH6sD1fG5aZ0cB4yE2u"


async def session_block(stack, token, session, project=PROJECT):
    r = await stack.recall.post(
        "/v1/inject",
        json={"kind": "session", "session_id": session, "project": project},
        headers=auth(token),
    )
    assert r.status_code == 200, r.text
    return r.json()


# --- events and the timeline ---------------------------------------------------------------


async def test_events_are_recorded_and_listed_newest_first(stack, two_banks, conn):
    alpha, _ = two_banks
    out = await post_events(
        stack, alpha.rw,
        ev("s1", "session_start", agent="claude-code", machine="laptop", branch="main",
           cwd="services/api"),
        ev("s1", path="./src/app.py", tool="Edit"),
        ev("s1", "command", command="pytest -q", exit_code=1),
        ev("s1", "session_end"),
    )
    assert out["recorded"] == 4 and out["conflicts"] == []
    r = await stack.recall.get("/v1/timeline", params={"project": PROJECT},
                               headers=auth(alpha.ro))
    assert r.status_code == 200, r.text
    events = r.json()["events"]
    assert [e["kind"] for e in events] == ["session_end", "command", "file", "session_start"]
    file_event = events[2]
    assert file_event["path"] == "src/app.py"  # relative to the repo root, "./" dropped
    assert file_event["tool"] == "Edit"
    assert file_event["agent"] == "claude-code" and file_event["member"] == "alice"
    assert file_event["machine"] == "laptop" and file_event["branch"] == "main"
    assert events[1]["command"] == "pytest -q" and events[1]["exit_code"] == 1
    row = await conn.fetchrow("SELECT * FROM timeline_sessions WHERE session_key = 's1'")
    assert row["cwd"] == "services/api" and row["ended_at"] is not None
    assert row["member"] == "alice"
    # Never facts: nothing of the timeline lands in the facts table.
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_timeline_since_and_limit(stack, two_banks):
    alpha, _ = two_banks
    now = datetime.now(UTC)
    await post_events(
        stack, alpha.rw,
        ev("s1", path="old.py", at=iso(now - timedelta(hours=3))),
        ev("s1", path="new.py", at=iso(now - timedelta(minutes=10))),
    )
    r = await stack.recall.get("/v1/timeline", params={"since": "2h"}, headers=auth(alpha.ro))
    assert [e["path"] for e in r.json()["events"]] == ["new.py"]
    r = await stack.recall.get("/v1/timeline", params={"limit": 1}, headers=auth(alpha.ro))
    assert len(r.json()["events"]) == 1
    r = await stack.recall.get("/v1/timeline", params={"since": "yesterday"},
                               headers=auth(alpha.ro))
    assert r.status_code == 400 and "duration" in r.text


async def test_agent_comes_from_the_header_when_the_event_names_none(stack, two_banks):
    alpha, _ = two_banks
    await post_events(stack, alpha.rw, ev("s1", path="a.py"), agent="codex")
    r = await stack.recall.get("/v1/timeline", headers=auth(alpha.ro))
    assert r.json()["events"][0]["agent"] == "codex"


async def test_bad_events_are_refused(stack, two_banks, conn):
    alpha, _ = two_banks
    for body in (
        {"events": []},
        {"events": [ev("s1", "dance")]},
        {"events": [ev("s1", bogus=1)]},
        {"events": [ev("s1", "command", command="ls", exit_code=2**40)]},
        {"events": [ev("", path="a.py")]},
    ):
        r = await stack.ingest.post("/v1/timeline/events", json=body, headers=auth(alpha.rw))
        assert r.status_code == 400, (body, r.status_code, r.text)
    assert await conn.fetchval("SELECT count(*) FROM timeline_events") == 0


async def test_scopes_read_token_cannot_write_and_no_token_is_401(stack, two_banks):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/timeline/events", json={"events": [ev("s1")]},
                                headers=auth(alpha.ro))
    assert r.status_code == 403
    r = await stack.ingest.post("/v1/handoffs", json={"text": "x"}, headers=auth(alpha.ro))
    assert r.status_code == 403
    for path in ("/v1/timeline", "/v1/handoffs"):
        assert (await stack.recall.get(path)).status_code == 401
    r = await stack.recall.get("/v1/timeline/conflicts", params={"project": PROJECT})
    assert r.status_code == 401


# --- redaction -----------------------------------------------------------------------------


async def test_a_secret_in_a_command_line_is_redacted(stack, two_banks, conn):
    alpha, _ = two_banks
    command = f"curl -H 'Authorization: token {GITHUB}' https://api.github.com/user"
    await post_events(
        stack, alpha.rw,
        ev("s1", "command", command=command, exit_code=0),
        ev("s1", "command", command=f"export GITHUB_TOKEN={GITHUB}", exit_code=0),
    )
    r = await stack.recall.get("/v1/timeline", headers=auth(alpha.ro))
    assert GITHUB not in r.text
    assert "[REDACTED" in r.text
    assert "https://api.github.com/user" in r.text  # the rest of the command stays
    rows = await conn.fetch("SELECT command FROM timeline_events")
    assert all(GITHUB not in (row["command"] or "") for row in rows)


async def test_a_reject_bank_refuses_a_secret_in_an_event(stack, conn):
    tokens = await make_bank(conn, "strict")
    await conn.execute("UPDATE banks SET redaction_policy = 'reject' WHERE name = 'strict'")
    r = await stack.ingest.post(
        "/v1/timeline/events",
        json={"events": [ev("s1", "command", command=f"echo {GITHUB}")]},
        headers=auth(tokens.rw),
    )
    assert r.status_code == 422, r.text
    assert GITHUB not in r.text
    assert await conn.fetchval("SELECT count(*) FROM timeline_events") == 0


# --- conflicts -----------------------------------------------------------------------------


async def test_conflict_window_edges_29_59_and_30_01(stack, two_banks, conn):
    alpha, _ = two_banks
    _, bob = await banks.issue_token(conn, "alpha", "bob", "read,write")
    now = datetime.now(UTC)
    await post_events(
        stack, alpha.rw,
        ev("codex-1", "session_start", agent="codex", machine="desk", branch="main"),
        ev("codex-1", path="src/inside.py", at=iso(now - timedelta(minutes=29, seconds=59))),
        ev("codex-1", path="src/outside.py", at=iso(now - timedelta(minutes=30, seconds=1))),
    )
    out = await post_events(
        stack, bob,
        ev("claude-1", "session_start", agent="claude-code", machine="laptop", branch="main"),
        ev("claude-1", path="src/inside.py", at=iso(now)),
        ev("claude-1", path="src/outside.py", at=iso(now)),
    )
    assert [c["path"] for c in out["conflicts"]] == ["src/inside.py"]
    c = out["conflicts"][0]
    assert c["member"] == "alice" and c["agent"] == "codex" and c["machine"] == "desk"
    assert c["branch"] == "main" and c["other_branch"] is False
    assert 29 * 60 + 58 <= c["seconds_ago"] <= 29 * 60 + 60
    assert c["warning"] == (
        "src/inside.py was also touched by alice with codex on desk 29 min ago (branch main)"
    )
    # Recorded on the timeline.
    r = await stack.recall.get("/v1/timeline", params={"project": PROJECT},
                               headers=auth(alpha.ro))
    conflicts = [e for e in r.json()["events"] if e["kind"] == "conflict"]
    assert len(conflicts) == 1 and conflicts[0]["path"] == "src/inside.py"
    assert conflicts[0]["detail"] == c["warning"]


async def test_conflict_window_is_configurable(dsn, tmp_path, conn):
    from litestar.testing import AsyncTestClient

    from factbank.settings import Settings
    from factbank_ingest import app as ingest_app

    tokens = await make_bank(conn, "gamma")
    settings = Settings(home=tmp_path, redis_url=None, embedder="none",
                        conflict_window_minutes=5)
    now = datetime.now(UTC)
    async with AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as ingest:
        r = await ingest.post("/v1/timeline/events", headers=auth(tokens.rw), json={"events": [
            ev("a", path="x.py", at=iso(now - timedelta(minutes=6))),
            ev("a", path="y.py", at=iso(now - timedelta(minutes=4))),
        ]})
        assert r.status_code == 201, r.text
        r = await ingest.post("/v1/timeline/events", headers=auth(tokens.rw), json={"events": [
            ev("b", path="x.py"), ev("b", path="y.py"),
        ]})
        assert [c["path"] for c in r.json()["conflicts"]] == ["y.py"]


async def test_a_different_branch_is_marked(stack, two_banks):
    alpha, _ = two_banks
    await post_events(stack, alpha.rw,
                      ev("s1", "session_start", agent="codex", branch="feature/retry"),
                      ev("s1", path="src/app.py"))
    out = await post_events(stack, alpha.rw,
                            ev("s2", "session_start", agent="claude-code", branch="main"),
                            ev("s2", path="src/app.py"))
    (c,) = out["conflicts"]
    assert c["other_branch"] is True and c["branch"] == "feature/retry"
    assert "DIFFERENT branch: feature/retry" in c["warning"]


async def test_the_same_session_or_another_project_is_no_conflict(stack, two_banks):
    alpha, _ = two_banks
    await post_events(stack, alpha.rw, ev("s1", path="src/app.py"))
    out = await post_events(stack, alpha.rw, ev("s1", path="src/app.py"))
    assert out["conflicts"] == []
    out = await post_events(stack, alpha.rw,
                            ev("s2", path="src/app.py", project="github.com/acme/other"))
    assert out["conflicts"] == []
    out = await post_events(stack, alpha.rw, ev("s3", path="src/app.py", project=None))
    assert out["conflicts"] == []


async def test_conflicts_route_answers_for_a_path_and_for_the_project(stack, two_banks):
    alpha, _ = two_banks
    await post_events(stack, alpha.rw, ev("s1", "session_start", agent="codex"),
                      ev("s1", path="src/app.py"))
    r = await stack.recall.get(
        "/v1/timeline/conflicts",
        params={"project": PROJECT, "path": "src/app.py", "session_id": "s2"},
        headers=auth(alpha.ro),
    )
    assert r.status_code == 200, r.text
    (warning,) = r.json()["conflicts"]
    assert warning.startswith("src/app.py was also touched by alice with codex")
    # Nothing recorded yet: no live conflicts in the project.
    r = await stack.recall.get("/v1/timeline/conflicts", params={"project": PROJECT},
                               headers=auth(alpha.ro))
    assert r.json()["conflicts"] == []
    await post_events(stack, alpha.rw, ev("s2", path="src/app.py"))
    r = await stack.recall.get("/v1/timeline/conflicts",
                               params={"project": PROJECT, "session_id": "s1"},
                               headers=auth(alpha.ro))
    assert len(r.json()["conflicts"]) == 1  # s1 is told too: the file is one it touched


# --- isolation -----------------------------------------------------------------------------


async def test_banks_never_see_each_others_timeline(stack, two_banks, conn):
    alpha, beta = two_banks
    await post_events(stack, beta.rw, ev("b1", "session_start", agent="codex"),
                      ev("b1", path="src/zircon.py"))
    r = await stack.ingest.post("/v1/handoffs", headers=auth(beta.rw),
                                json={"text": "zircon ledger handoff", "project": PROJECT})
    assert r.status_code == 201
    # The same project key and path in alpha: no conflict with beta's session.
    out = await post_events(stack, alpha.rw, ev("a1", path="src/zircon.py"))
    assert out["conflicts"] == []
    for path, params in (("/v1/timeline", {}), ("/v1/handoffs", {}),
                         ("/v1/timeline/conflicts", {"project": PROJECT,
                                                     "path": "src/zircon.py"})):
        r = await stack.recall.get(path, params=params, headers=auth(alpha.admin))
        assert r.status_code == 200
        assert "b1" not in r.text and "ledger" not in r.text and "codex" not in r.text, path
    block = await session_block(stack, alpha.rw, "a2")
    # alpha's own a1 session is there; beta's codex session and handoff are not.
    assert "codex" not in block["text"] and "ledger" not in block["text"]
    # Beta's handoff is still open for beta.
    assert await conn.fetchval("SELECT delivered_at FROM handoffs") is None


# --- handoffs ------------------------------------------------------------------------------


async def test_a_handoff_is_delivered_once_to_the_next_session(stack, two_banks, conn):
    alpha, _ = two_banks
    fact = await stack.ingest.post("/v1/facts", json=fact_body(), headers=auth(alpha.rw))
    fact_id = fact.json()["fact"]["id"]
    r = await stack.ingest.post(
        "/v1/handoffs",
        headers={**auth(alpha.rw), "X-Factbank-Agent": "pi"},
        json={"text": "Retry refactor half done; finish src/retry.py", "project": PROJECT,
              "files": ["src/retry.py"], "fact_ids": [fact_id]},
    )
    assert r.status_code == 201, r.text
    handoff = r.json()
    assert handoff["delivered_at"] is None and handoff["fact_ids"] == [fact_id]
    await post_events(stack, alpha.rw, ev("next", "session_start", agent="claude-code"))
    first = await session_block(stack, alpha.rw, "next")
    assert "Recently in this project" in first["text"]
    assert f"Handoff #{handoff['id']} from alice (pi)" in first["text"]
    assert "Retry refactor half done" in first["text"]
    assert "src/retry.py" in first["text"] and f"#{fact_id}" in first["text"]
    assert first["tokens"] <= 1500
    # Once: not in the same session again, nor in the one after.
    again = await session_block(stack, alpha.rw, "next")
    assert "Retry refactor" not in again["text"]
    later = await session_block(stack, alpha.rw, "later")
    assert "Retry refactor" not in later["text"]
    row = await conn.fetchrow("SELECT delivered_at, delivered_to_session FROM handoffs")
    assert row["delivered_at"] is not None and row["delivered_to_session"] == "next"
    r = await stack.recall.get("/v1/handoffs", params={"open": "true"}, headers=auth(alpha.ro))
    assert r.json()["handoffs"] == []
    r = await stack.recall.get("/v1/timeline", headers=auth(alpha.ro))
    assert any(e["kind"] == "handoff" for e in r.json()["events"])
    # A handoff is never a fact.
    assert await conn.fetchval("SELECT count(*) FROM facts") == 1


async def test_a_handoff_for_a_named_agent_waits_for_that_agent(stack, two_banks, conn):
    alpha, _ = two_banks
    _, bob = await banks.issue_token(conn, "alpha", "bob", "read,write")
    await stack.ingest.post("/v1/handoffs", headers=auth(alpha.rw),
                            json={"text": "for codex only", "project": PROJECT,
                                  "to_agent": "codex"})
    await stack.ingest.post("/v1/handoffs", headers=auth(alpha.rw),
                            json={"text": "for bob only", "project": PROJECT,
                                  "to_member": "bob"})
    await post_events(stack, alpha.rw, ev("c1", "session_start", agent="claude-code"))
    block = await session_block(stack, alpha.rw, "c1")
    assert "codex only" not in block["text"] and "bob only" not in block["text"]
    await post_events(stack, alpha.rw, ev("x1", "session_start", agent="codex"))
    block = await session_block(stack, alpha.rw, "x1")
    assert "for codex only" in block["text"] and "bob only" not in block["text"]
    await post_events(stack, bob, ev("b1", "session_start", agent="claude-code"))
    block = await session_block(stack, bob, "b1")
    assert "for bob only" in block["text"]
    assert await conn.fetchval("SELECT count(*) FROM handoffs WHERE delivered_at IS NULL") == 0


async def test_a_secret_in_a_handoff_is_redacted(stack, two_banks, conn):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/handoffs", headers=auth(alpha.rw),
                                json={"text": f"use GITHUB_TOKEN={GITHUB} to push",
                                      "project": PROJECT})
    assert r.status_code == 201
    assert GITHUB not in r.text
    assert GITHUB not in await conn.fetchval("SELECT text FROM handoffs")


# --- the session briefing ------------------------------------------------------------------


async def test_session_block_has_recent_sessions_by_others(stack, two_banks, conn):
    alpha, _ = two_banks
    _, bob = await banks.issue_token(conn, "alpha", "bob", "read,write")
    assert (await session_block(stack, alpha.rw, "empty"))["text"] == ""  # nothing: no section
    await post_events(
        stack, bob,
        ev("codex-9", "session_start", agent="codex", machine="desk", branch="feat"),
        *[ev("codex-9", path=f"src/m{i}.py",
             at=iso(datetime.now(UTC) - timedelta(seconds=10 - i))) for i in range(7)],
        ev("codex-9", "session_end"),
    )
    await post_events(stack, alpha.rw, ev("mine", "session_start", agent="claude-code"))
    block = await session_block(stack, alpha.rw, "mine")
    text = block["text"]
    assert "[factbank] Recently in this project" in text
    assert "- bob with codex on desk, branch feat, ended" in text
    assert "src/m6.py" in text and "(+2 more)" in text
    # Another project's briefing does not show it.
    other = await session_block(stack, alpha.rw, "mine2", project="github.com/acme/else")
    assert "codex" not in other["text"]


async def test_session_block_shows_live_conflicts_and_keeps_the_budget(stack, two_banks):
    alpha, _ = two_banks
    for i in range(30):
        r = await stack.ingest.post(
            "/v1/facts",
            json=fact_body(f"Service number {i} of the api listens on port {8000 + i}",
                           project=PROJECT, category="project", quote=f"port: {8000 + i}"),
            headers=auth(alpha.rw),
        )
        assert r.status_code == 201, r.text
    await post_events(stack, alpha.rw, ev("s1", "session_start", agent="codex"),
                      ev("s1", path="src/app.py"))
    await post_events(stack, alpha.rw, ev("s2", "session_start", agent="claude-code"),
                      ev("s2", path="src/app.py"))
    block = await session_block(stack, alpha.rw, "s3")
    assert "- Conflict: src/app.py was also touched by alice with codex" in block["text"]
    assert block["tokens"] <= 1500
    assert block["facts"]  # the facts still come


# --- retention -----------------------------------------------------------------------------


async def test_retention_cleanup_removes_old_rows(stack, two_banks, conn):
    alpha, beta = two_banks
    await post_events(stack, alpha.rw, ev("old", path="a.py"), ev("new", path="b.py"))
    await stack.ingest.post("/v1/handoffs", headers=auth(alpha.rw),
                            json={"text": "old note", "project": PROJECT})
    await conn.execute("UPDATE timeline_events SET at = now() - interval '31 days' "
                       "WHERE path = 'a.py'")
    await conn.execute("UPDATE timeline_sessions SET last_at = now() - interval '31 days' "
                       "WHERE session_key = 'old'")
    await conn.execute("UPDATE handoffs SET created_at = now() - interval '31 days'")
    await post_events(stack, beta.rw, ev("beta-old", path="c.py"))
    await conn.execute("UPDATE timeline_events SET at = now() - interval '31 days' "
                       "WHERE path = 'c.py'")
    alpha_id = await conn.fetchval("SELECT id FROM banks WHERE name = 'alpha'")
    counts = await events.cleanup(conn, 30, bank_id=alpha_id)
    assert counts == {"timeline_events": 1, "timeline_sessions": 1, "handoffs": 1}
    # One bank's cleanup leaves the other's rows; a cleanup of all removes them.
    assert await conn.fetchval("SELECT count(*) FROM timeline_events WHERE path = 'c.py'") == 1
    assert (await events.cleanup(conn, 30))["timeline_events"] == 1
    paths = [r["path"] for r in await conn.fetch("SELECT path FROM timeline_events")]
    assert "a.py" not in paths and "b.py" in paths


async def test_a_session_start_cleans_its_bank_and_old_events_are_not_stored(stack, two_banks,
                                                                            conn):
    alpha, _ = two_banks
    await post_events(stack, alpha.rw, ev("s1", path="a.py"))
    await conn.execute("UPDATE timeline_events SET at = now() - interval '40 days'")
    out = await post_events(stack, alpha.rw, ev("s2", "session_start"),
                            ev("s2", path="z.py",
                               at=iso(datetime.now(UTC) - timedelta(days=45))))
    assert out["recorded"] == 1
    paths = [r["path"] for r in await conn.fetch("SELECT path FROM timeline_events")]
    assert paths == [None]  # only s2's session start


# --- the CLI and the client library --------------------------------------------------------


async def test_cli_handoff_and_timeline(cli_env, capsys):  # noqa: F811
    login(capsys, cli_env, team=True)
    (cli_env.repo / "src").mkdir()
    (cli_env.repo / "src" / "retry.py").write_text("x = 1\n", "utf-8")
    with Client(cli_env.config(), agent="codex") as client:
        out = client.record_events([
            {"session_id": "cx-1", "kind": "session_start", "project": cli_env.project,
             "agent": "codex", "machine": "desk", "branch": "main"},
            {"session_id": "cx-1", "kind": "file", "project": cli_env.project,
             "path": "src/retry.py", "tool": "apply_patch"},
            {"session_id": "cx-1", "kind": "command", "project": cli_env.project,
             "command": "pytest -q tests/test_retry.py", "exit_code": 1},
        ])
        assert out["bank"] == "team" and out["recorded"] == 3
    out = ok(capsys, "handoff", "Retry refactor half done; tests fail", "--to", "claude-code",
             "--file", "src/retry.py", "--fact", "7")
    # `claude-code` is Claude Code's MCP name; its sessions (named by the hooks) are `claude`
    assert "handoff #1 for claude in github.com/acme/api, in team bank acme, visible to " \
           "1 member (alice)" in out
    out = ok(capsys, "timeline", "--since", "2h")
    lines = out.splitlines()
    assert lines[0].split() == ["WHEN", "WHO", "MACHINE", "BRANCH", "KIND", "WHAT"]
    assert "handoff #1 to claude" in lines[1]
    assert "$ pytest -q tests/test_retry.py  -> 1" in out
    assert "src/retry.py (apply_patch)" in out and "alice/codex" in out
    data = json.loads(ok(capsys, "timeline", "--json"))
    assert data["project"] == cli_env.project
    assert [e["kind"] for e in data["events"]] == ["handoff", "command", "file",
                                                   "session_start"]
    with Client(cli_env.config()) as client:
        (h,) = client.handoffs(project=cli_env.project, open_only=True)
        assert h["files"] == ["src/retry.py"] and h["fact_ids"] == [7]
        assert h["to_agent"] == "claude"
        # The age is the clock's ("0s ago", or a few seconds on a busy machine).
        (warning,) = client.conflicts(cli_env.project, path="src/retry.py", session_id="cc-1")
        assert re.fullmatch(
            r"src/retry\.py was also touched by alice with codex on desk \d+s ago \(branch main\)",
            warning,
        ), warning
    code, _, err = run(capsys, "timeline", "--since", "soon")
    assert code == 2 and "duration" in err
    (cli_env.repo / "src" / "retry.py").unlink()


async def test_cli_timeline_outside_a_repo_says_what_to_pass(
    cli_env, capsys, tmp_path, monkeypatch  # noqa: F811
):
    login(capsys, cli_env)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "timeline")
    assert code == 2 and "--project" in err
    code, _, err = run(capsys, "timeline", "--all-projects")
    assert code == 0 and "nothing on the timeline" in err


# --- the recording hooks against the real services -----------------------------------------


async def test_hooks_record_and_tell_the_second_session_of_the_conflict(
    cli_env, capsys, tmp_path, monkeypatch  # noqa: F811
):
    """The recording hooks' work (what their detached child does, run here in-process)
    against the real services: Codex's patch and Claude Code's write of the same file; the
    conflict is left for Claude Code's next hook, and the command's secret is redacted."""
    import asyncio
    import time

    from factbank_client.hook import main as hookmain
    from factbank_client.hook import pending
    from factbank_client.hook import record as hookrecord

    login(capsys, cli_env)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (cli_env.repo / "src").mkdir(exist_ok=True)
    target = str(cli_env.repo / "src" / "app.py")

    def record(event: str, data: dict) -> None:
        hookrecord.process(event, json.dumps(data).encode())

    codex = {"session_id": "codex-1", "cwd": str(cli_env.repo), "turn_id": "t1",
             "model": "m", "hook_event_name": "PostToolUse", "tool_name": "apply_patch",
             "tool_input": {"input": "*** Begin Patch\n*** Update File: src/app.py\n"
                                     "@@\n-a\n+b\n*** End Patch\n"},
             "tool_response": "ok", "tool_use_id": "u1", "permission_mode": "default",
             "transcript_path": None}
    await asyncio.to_thread(record, "PostToolUse", codex)
    monkeypatch.setenv("CLAUDECODE", "1")
    await asyncio.to_thread(hookmain.run, "SessionStart", json.dumps(
        {"session_id": "claude-1", "cwd": str(cli_env.repo),
         "hook_event_name": "SessionStart"}).encode(), time.monotonic() + 5)
    await asyncio.to_thread(record, "PostToolUse", {
        "session_id": "claude-1", "cwd": str(cli_env.repo), "hook_event_name": "PostToolUse",
        "tool_name": "Write", "tool_input": {"file_path": target, "content": "x"},
        "tool_response": {}, "tool_use_id": "toolu_1"})
    context = json.loads(pending.take_pending("claude-1"))["hookSpecificOutput"][
        "additionalContext"]
    assert "src/app.py was also touched by alice with codex" in context
    assert pending.take_pending("claude-1") == b""  # told once
    secret = "ghp_R7mK2xQ9vL4pT8wN3jH6sD1fG5aZ0cB4yE2u"
    await asyncio.to_thread(record, "PostToolUse", {
        "session_id": "claude-1", "cwd": str(cli_env.repo), "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": f"GH_TOKEN={secret} gh pr list"},
        "tool_response": {"stdout": ""}, "tool_use_id": "toolu_2"})
    with Client(cli_env.config()) as client:
        events = client.timeline(project=cli_env.project)
    kinds = [(e["kind"], e.get("agent"), e.get("path") or e.get("command")) for e in events]
    assert ("file", "codex", "src/app.py") in kinds and ("file", "claude", "src/app.py") in kinds
    assert any(k == "conflict" for k, _, _ in kinds)
    command = next(e for e in events if e["kind"] == "command")
    assert secret not in command["command"] and "gh pr list" in command["command"]
    assert command["exit_code"] == 0
    assert not (tmp_path / "cache" / "factbank" / "timeline-buffer.jsonl.sending").exists()


# --- secrets planted in every string of the timeline routes --------------------------------

TIMELINE_BODIES = {
    "/v1/timeline/events": {"events": [
        {"session_id": "s-plant", "kind": "session_start", "project": PROJECT,
         "agent": "codex", "machine": "desk", "branch": "main", "cwd": "src"},
        {"session_id": "s-plant", "kind": "file", "project": PROJECT, "path": "src/app.py",
         "tool": "Edit"},
        {"session_id": "s-plant", "kind": "command", "project": PROJECT,
         "command": "make test", "exit_code": 0},
    ]},
    "/v1/handoffs": {"text": "finish the retry work", "project": PROJECT, "to_agent": "codex",
                     "to_member": "alice", "files": ["src/retry.py"], "session_id": "s-h",
                     "agent": "pi"},
}
TIMELINE_READS = {
    "/v1/timeline": ["project", "since"],
    "/v1/timeline/conflicts": ["project", "path", "session_id", "branch"],
    "/v1/handoffs": ["project"],
}


async def test_no_secret_planted_in_a_timeline_route_lands_anywhere(stack, two_banks, conn):
    from tests.integration.secrets_probe import SECRETS, dump_tables, leaks, plantings

    alpha, _ = two_banks
    responses: list[str] = []
    # A file another session touched, so every planted file event also records a conflict.
    await post_events(stack, alpha.rw, ev("other", path="src/app.py"))
    for planted in SECRETS:
        for path, body in TIMELINE_BODIES.items():
            bodies = [body, *(mutated for _, mutated in plantings(body, planted))]
            for i, sent in enumerate(bodies):
                headers = {**auth(alpha.rw),
                           "X-Factbank-Agent": planted.encode() if i == 0 else "x"}
                r = await stack.ingest.post(path, json=sent, headers=headers)
                assert r.status_code < 500, (path, r.status_code, r.text)
                responses.append(r.text)
        for path, params in TIMELINE_READS.items():
            for name in params:
                query = {"project": PROJECT, name: planted}
                r = await stack.recall.get(path, params=query, headers=auth(alpha.ro))
                assert r.status_code < 500, (path, name, r.status_code, r.text)
                responses.append(r.text)
    await post_events(stack, alpha.rw, ev("reader", "session_start", agent="codex"))
    r = await stack.recall.post("/v1/inject", headers=auth(alpha.ro), json={
        "kind": "session", "session_id": "reader", "project": PROJECT})
    responses.append(r.text)
    for path in TIMELINE_READS:
        r = await stack.recall.get(path, params={"limit": 1000} if path == "/v1/timeline"
                                   else {"project": PROJECT}, headers=auth(alpha.ro))
        responses.append(r.text)
    found = [f"response: {s}" for text in responses for s in leaks(text)]
    tables = await dump_tables(conn)
    for name in ("timeline_sessions", "timeline_events", "handoffs"):
        found += [f"table {name}: {s}" for s in leaks(tables[name])]
    assert not found, sorted(set(found))
    assert "[REDACTED:" in tables["timeline_events"] and "[REDACTED:" in tables["handoffs"]
    assert await conn.fetchval(
        "SELECT count(*) FROM timeline_events WHERE kind = 'conflict'") > 0
