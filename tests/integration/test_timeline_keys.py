"""An event's identity (migration 0006): the same event sent twice is stored once, so a hook
and a history import, or two imports, never double the timeline. And a batch is judged as if
its events came one at a time (one conflict for two touches, recorded under the second)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.integration.conftest import auth
from tests.integration.timeline_events import ev, iso, post_events


async def test_an_event_with_a_key_the_session_holds_is_not_stored_again(stack, two_banks, conn):
    alpha, _ = two_banks
    batch = [ev("cx-1", "session_start", agent="codex", key="start"),
             ev("cx-1", path="src/app.py", tool="apply_patch", key="call_1:0"),
             ev("cx-1", "command", command="pytest -q", exit_code=1, key="call_2:0"),
             ev("cx-1", "session_end", key="end")]
    first = await post_events(stack, alpha.rw, *batch)
    assert first["recorded"] == 4 and first["duplicates"] == 0
    again = await post_events(stack, alpha.rw, *batch)
    assert again["recorded"] == 0 and again["duplicates"] == 4 and again["ids"] == []
    assert await conn.fetchval("SELECT count(*) FROM timeline_events") == 4
    assert await conn.fetchval("SELECT count(*) FROM timeline_sessions") == 1
    # Keys are stored as digests: no text of the key lands.
    keys = await conn.fetch("SELECT key FROM timeline_events")
    assert all(len(r["key"]) == 32 and "call" not in r["key"] for r in keys)


async def test_the_same_key_in_another_session_or_no_key_is_stored(stack, two_banks, conn):
    alpha, _ = two_banks
    out = await post_events(stack, alpha.rw,
                            ev("a", path="x.py", key="t1:0"), ev("b", path="y.py", key="t1:0"),
                            ev("a", path="z.py"), ev("a", path="z.py"))
    assert out["recorded"] == 4
    # Two of the same key in one batch: the first is kept.
    out = await post_events(stack, alpha.rw, ev("c", path="p.py", key="k"),
                            ev("c", path="q.py", key="k"))
    assert out["recorded"] == 1 and out["duplicates"] == 1
    assert await conn.fetchval("SELECT path FROM timeline_events WHERE path IN ('p.py', 'q.py')"
                               ) == "p.py"


async def test_a_duplicate_touch_records_no_second_conflict(stack, two_banks, conn):
    alpha, _ = two_banks
    await post_events(stack, alpha.rw, ev("codex-1", path="src/app.py", key="c1:0"))
    out = await post_events(stack, alpha.rw, ev("claude-1", path="src/app.py", key="t1:0"))
    assert len(out["conflicts"]) == 1 and out["conflicts"][0]["session_id"] == "claude-1"
    out = await post_events(stack, alpha.rw, ev("claude-1", path="src/app.py", key="t1:0"))
    assert out["conflicts"] == [] and out["duplicates"] == 1
    assert await conn.fetchval(
        "SELECT count(*) FROM timeline_events WHERE kind = 'conflict'") == 1


async def test_a_batch_is_judged_one_event_at_a_time(stack, two_banks, conn):
    """Two sessions touching one file in one batch (a history import): one conflict, the
    second session's, as if the events had come one by one."""
    alpha, _ = two_banks
    now = datetime.now(UTC)
    out = await post_events(
        stack, alpha.rw,
        ev("s1", "session_start", agent="codex", branch="feature/x"),
        ev("s1", path="src/app.py", at=iso(now - timedelta(minutes=5))),
        ev("s2", "session_start", agent="claude", branch="main"),
        ev("s2", path="src/app.py", at=iso(now)),
    )
    (c,) = out["conflicts"]
    assert c["session_id"] == "s2" and c["agent"] == "codex" and c["other_branch"] is True
    assert 299 <= c["seconds_ago"] <= 301
    rows = await conn.fetch(
        """SELECT s.session_key, e.branch, e.detail FROM timeline_events e
           JOIN timeline_sessions s ON s.id = e.session_id WHERE e.kind = 'conflict'""")
    assert [(r["session_key"], r["branch"]) for r in rows] == [("s2", "main")]
    assert rows[0]["detail"] == c["warning"]


async def test_replayed_session_times_do_not_move_back(stack, two_banks, conn):
    alpha, _ = two_banks
    now = datetime.now(UTC)
    early, late = now - timedelta(hours=2), now - timedelta(hours=1)
    await post_events(stack, alpha.rw, ev("s", "session_start", at=iso(early), key="start"),
                      ev("s", "session_end", at=iso(late), key="end"))
    # A resumed session ends again, later; the replay of the first end changes nothing.
    await post_events(stack, alpha.rw, ev("s", "session_end", at=iso(now), key="end2"))
    await post_events(stack, alpha.rw, ev("s", "session_end", at=iso(late), key="end"))
    row = await conn.fetchrow("SELECT started_at, ended_at, last_at FROM timeline_sessions")
    assert row["started_at"] == early and row["ended_at"] == now and row["last_at"] == now


async def test_a_key_is_checked(stack, two_banks):
    alpha, _ = two_banks
    for bad in ("", "k" * 201, 7):
        r = await stack.ingest.post("/v1/timeline/events", headers=auth(alpha.rw),
                                    json={"events": [ev("s", path="a.py", key=bad)]})
        assert r.status_code == 400, r.text
        assert "key" in r.text
