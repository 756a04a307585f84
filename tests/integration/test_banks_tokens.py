"""Banks, members and tokens against the real database and the real services."""

from __future__ import annotations

import asyncpg
import pytest

from factbank.store import audit, banks
from tests.integration.conftest import auth, fact_body


async def test_token_is_stored_only_as_hash(conn):
    await banks.create_bank(conn, "solo")
    info, token = await banks.issue_token(conn, "solo", "me", "read,write")
    assert token.startswith("fb_") and len(token) > 40
    row = await conn.fetchrow("SELECT * FROM tokens WHERE id = $1", info.id)
    stored = " ".join(str(v) for v in dict(row).values())
    assert token not in stored
    assert bytes(row["token_hash"]) == banks.hash_token(token)
    assert info.prefix == token[:11]


async def test_bank_gets_default_categories(conn):
    await banks.create_bank(conn, "cats")
    rows = await conn.fetch(
        "SELECT c.name, c.auto_inject, c.decays FROM categories c JOIN banks b ON b.id = c.bank_id"
        " WHERE b.name = 'cats' ORDER BY c.name"
    )
    got = {r["name"]: (r["auto_inject"], r["decays"]) for r in rows}
    assert set(got) == {
        "preferences", "environment", "project", "decisions", "gotchas", "people", "reference",
    }
    assert [n for n, (inject, _) in got.items() if inject] == ["environment", "preferences",
                                                               "project"]
    assert got["preferences"][1] is False


async def test_bad_names_and_scopes_are_refused(conn):
    with pytest.raises(ValueError, match="bad bank name"):
        await banks.create_bank(conn, "Has Spaces")
    await banks.create_bank(conn, "ok")
    with pytest.raises(banks.Conflict):
        await banks.create_bank(conn, "ok")
    with pytest.raises(ValueError, match="scopes"):
        await banks.issue_token(conn, "ok", "me", "read,delete")
    with pytest.raises(banks.NotFound):
        await banks.issue_token(conn, "nope", "me", "read")


async def test_revoked_token_stops_at_once(stack, conn):
    await banks.create_bank(conn, "rv")
    info, token = await banks.issue_token(conn, "rv", "me", "read,write")
    r = await stack.recall.get("/v1/facts", headers=auth(token))
    assert r.status_code == 200
    await banks.revoke_token(conn, info.id)
    r = await stack.recall.get("/v1/facts", headers=auth(token))
    assert r.status_code == 401
    assert "revoked" in r.json()["detail"]


async def test_rotate_replaces_token(stack, conn):
    await banks.create_bank(conn, "rot")
    info, old = await banks.issue_token(conn, "rot", "me", "read")
    new_info, new = await banks.rotate_token(conn, info.id)
    assert new_info.scopes == ("read",) and new_info.member == "me"
    assert (await stack.recall.get("/v1/facts", headers=auth(old))).status_code == 401
    assert (await stack.recall.get("/v1/facts", headers=auth(new))).status_code == 200
    with pytest.raises(banks.Conflict):
        await banks.rotate_token(conn, info.id)


async def test_last_use_is_recorded(stack, conn):
    await banks.create_bank(conn, "lu")
    info, token = await banks.issue_token(conn, "lu", "me", "read")
    assert info.last_used_at is None
    await stack.recall.get("/v1/facts", headers=auth(token))
    assert (await banks.get_token(conn, info.id)).last_used_at is not None


async def test_team_bank_records_which_member_wrote(stack, conn):
    await banks.create_bank(conn, "team", "team")
    _, ann = await banks.issue_token(conn, "team", "ann", "read,write")
    _, bob = await banks.issue_token(conn, "team", "bob", "read,write")
    r1 = await stack.ingest.post("/v1/facts", json=fact_body("CI runs on runner-a"),
                                 headers={**auth(ann), "X-Factbank-Agent": "codex"})
    r2 = await stack.ingest.post("/v1/facts", json=fact_body("Deploys go through argo"),
                                 headers={**auth(bob), "X-Factbank-Agent": "claude-code"})
    assert r1.json()["fact"]["created_by"] == {"member": "ann", "agent": "codex"}
    assert r2.json()["fact"]["created_by"] == {"member": "bob", "agent": "claude-code"}


async def test_no_bearer_and_wrong_scheme(stack):
    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer "},
                    {"Authorization": "Bearer fb_not-a-real-token"}):
        r = await stack.recall.get("/v1/facts", headers=headers)
        assert r.status_code == 401
        assert r.json()["detail"]


async def test_admin_actions_are_audited(conn):
    await banks.create_bank(conn, "aud")
    info, _ = await banks.issue_token(conn, "aud", "me", "read")
    await banks.revoke_token(conn, info.id)
    actions = [r["action"] for r in await conn.fetch("SELECT action FROM audit_log ORDER BY id")]
    assert actions == ["bank.create", "member.add", "token.issue", "token.revoke"]
    assert await audit.verify(conn) == []


async def test_audit_log_refuses_update(conn):
    await banks.create_bank(conn, "ao")
    with pytest.raises(asyncpg.RaiseError, match="append-only"):
        await conn.execute("UPDATE audit_log SET action = 'x'")
