"""Both sessions are told of a conflict: the editing one by its own hook (the
events answer), the other one once, in its next prompt block."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from factbank.store import banks
from tests.integration.conftest import auth
from tests.integration.timeline_events import PROJECT, ev, iso, post_events


async def prompt_text(stack, token, session, project=PROJECT) -> str:
    r = await stack.recall.post(
        "/v1/inject",
        json={"kind": "prompt", "session_id": session, "project": project,
              "prompt": "what next for the retry logic?"},
        headers=auth(token),
    )
    assert r.status_code == 200, r.text
    return r.json()["text"]


async def test_the_other_session_is_told_once_in_its_next_prompt_block(stack, two_banks, conn):
    alpha, _ = two_banks
    _, bob = await banks.issue_token(conn, "alpha", "bob", "read,write")
    await post_events(stack, alpha.rw,
                      ev("codex-1", "session_start", agent="codex", machine="desk",
                         branch="feature/retry"),
                      ev("codex-1", path="src/app.py", tool="apply_patch"))
    assert await prompt_text(stack, alpha.ro, "codex-1") == ""  # nothing to tell yet
    out = await post_events(stack, bob,
                            ev("claude-1", "session_start", agent="claude", machine="laptop",
                               branch="main"),
                            ev("claude-1", path="src/app.py", tool="Edit"))
    assert out["conflicts"][0]["session_id"] == "claude-1"  # the editor's hook tells it
    text = await prompt_text(stack, alpha.ro, "codex-1")
    assert text.startswith("[factbank] Possible edit conflict (timeline, not facts):")
    assert re.search(r"\n- src/app.py was also touched by bob with claude on laptop \d+s ago "
                     r"\(a DIFFERENT branch: main\)", text), text
    assert await prompt_text(stack, alpha.ro, "codex-1") == ""  # once
    # The editor is not told again by the server, and another project's session is not told.
    assert await prompt_text(stack, bob, "claude-1") == ""
    assert await conn.fetchval(
        "SELECT count(*) FROM timeline_events WHERE kind = 'conflict' AND told_at IS NOT NULL"
    ) == 1


async def test_a_conflict_older_than_the_window_is_not_told(stack, two_banks, conn):
    alpha, _ = two_banks
    long_ago = datetime.now(UTC) - timedelta(minutes=45)
    await post_events(stack, alpha.rw,
                      ev("a", path="src/x.py", at=iso(long_ago - timedelta(minutes=5))),
                      ev("b", path="src/x.py", at=iso(long_ago)))
    assert await conn.fetchval(
        "SELECT count(*) FROM timeline_events WHERE kind = 'conflict'") == 1
    assert await prompt_text(stack, alpha.ro, "a") == ""


async def test_another_banks_session_of_the_same_id_is_not_told(stack, two_banks):
    alpha, beta = two_banks
    await post_events(stack, alpha.rw, ev("same", path="src/app.py"))
    await post_events(stack, beta.rw, ev("same", path="src/app.py"))
    await post_events(stack, alpha.rw, ev("other", path="src/app.py"))
    assert await prompt_text(stack, beta.ro, "same") == ""
    assert "src/app.py was also touched by alice" in await prompt_text(stack, alpha.ro, "same")
