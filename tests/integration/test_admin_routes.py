"""The admin routes over HTTP (for the dashboard): members and tokens with last
use, issue/rotate/revoke with the new token shown once, the audit chain's verify and export,
each within the token's own bank, bad input a 4xx naming the field."""

from __future__ import annotations

import json

from tests.integration.conftest import auth, tamper


async def test_members_tokens_issue_rotate_revoke(stack, two_banks, conn):
    alpha, beta = two_banks
    r = await stack.ingest.get("/v1/admin/members", headers=auth(alpha.admin))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["bank"] == "alpha"
    assert [m["name"] for m in body["members"]] == ["alice"]
    assert body["members"][0]["live_tokens"] == 3
    assert {t["bank"] for t in body["tokens"]} == {"alpha"}
    assert all("token" not in t and "token_hash" not in t for t in body["tokens"])
    # The admin token itself was used just now: its last use is recorded.
    assert any(t["last_used_at"] for t in body["tokens"])

    r = await stack.ingest.post("/v1/admin/tokens", headers=auth(alpha.admin),
                                json={"member": "bob", "scopes": ["read"], "label": "laptop"})
    assert r.status_code == 201, r.text
    issued = r.json()
    assert issued["token"].startswith("fb_") and issued["member"] == "bob"
    assert issued["scopes"] == ["read"]
    r = await stack.recall.get("/v1/whoami", headers=auth(issued["token"]))
    assert r.json() == {"bank": "alpha", "kind": "personal", "member": "bob",
                        "scopes": ["read"]}
    # Listed afterwards by prefix only: the token is never shown again.
    r = await stack.ingest.get("/v1/admin/members", headers=auth(alpha.admin))
    assert issued["token"] not in r.text
    assert "bob" in [m["name"] for m in r.json()["members"]]

    r = await stack.ingest.post(f"/v1/admin/tokens/{issued['id']}/rotate",
                                headers=auth(alpha.admin))
    assert r.status_code == 200, r.text
    rotated = r.json()
    assert rotated["replaces"] == issued["id"] and rotated["token"] != issued["token"]
    r = await stack.recall.get("/v1/whoami", headers=auth(issued["token"]))
    assert r.status_code == 401
    r = await stack.recall.get("/v1/whoami", headers=auth(rotated["token"]))
    assert r.status_code == 200

    r = await stack.ingest.post(f"/v1/admin/tokens/{rotated['id']}/revoke",
                                headers=auth(alpha.admin))
    assert r.status_code == 200 and r.json()["revoked_at"]
    r = await stack.recall.get("/v1/whoami", headers=auth(rotated["token"]))
    assert r.status_code == 401
    # Rotating a revoked token is a conflict, not a second live token.
    r = await stack.ingest.post(f"/v1/admin/tokens/{rotated['id']}/rotate",
                                headers=auth(alpha.admin))
    assert r.status_code == 409, r.text

    # Another bank's token is not there for alpha's admin.
    beta_token = await conn.fetchval(
        "SELECT t.id FROM tokens t JOIN banks b ON b.id = t.bank_id WHERE b.name = 'beta' "
        "LIMIT 1")
    for action in ("rotate", "revoke"):
        r = await stack.ingest.post(f"/v1/admin/tokens/{beta_token}/{action}",
                                    headers=auth(alpha.admin))
        assert r.status_code == 404, r.text
    assert await conn.fetchval("SELECT revoked_at FROM tokens WHERE id = $1", beta_token) is None
    # Without the admin scope: 403 on every admin route.
    for token in (alpha.rw, alpha.ro):
        r = await stack.ingest.get("/v1/admin/members", headers=auth(token))
        assert r.status_code == 403
        r = await stack.ingest.post("/v1/admin/tokens", headers=auth(token),
                                    json={"member": "eve"})
        assert r.status_code == 403
    assert beta  # (the fixture's second bank is the one kept apart above)


async def test_bad_input_names_the_field_and_writes_nothing(stack, two_banks, conn):
    alpha, _ = two_banks
    before = await conn.fetchval("SELECT count(*) FROM tokens")
    for body, field in (
        ({"member": "bob", "scopes": ["root"]}, "scopes"),
        ({"member": "bob", "scopes": []}, "scopes"),
        ({"member": ""}, "member"),
        ({"member": "bob", "extra": 1}, "extra"),
        ({"scopes": ["read"]}, "member"),
        ({"member": "ghp_R7mK2xQ9vL4pT8wN3jH6sD1fG5aZ0cB4yE2u"}, "member"),
    ):
        r = await stack.ingest.post("/v1/admin/tokens", headers=auth(alpha.admin), json=body)
        assert 400 <= r.status_code < 500, (body, r.status_code, r.text)
        assert field in r.text, (body, r.text)
    r = await stack.ingest.post("/v1/admin/tokens/abc/rotate", headers=auth(alpha.admin))
    assert r.status_code in (400, 404)
    r = await stack.ingest.post("/v1/admin/tokens/999999/revoke", headers=auth(alpha.admin))
    assert r.status_code == 404
    assert await conn.fetchval("SELECT count(*) FROM tokens") == before
    assert await conn.fetchval("SELECT count(*) FROM members WHERE name = 'bob'") == 0


async def test_label_is_redacted(stack, two_banks):
    alpha, _ = two_banks
    secret = "AKIAQ7R2X9KD4M3ZTB5W"
    r = await stack.ingest.post("/v1/admin/tokens", headers=auth(alpha.admin),
                                json={"member": "bob", "label": f"key {secret}"})
    assert r.status_code == 201, r.text
    assert secret not in r.text and "[REDACTED:" in r.json()["label"]


async def test_audit_verify_and_export(stack, two_banks, conn):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/admin/tokens", headers=auth(alpha.admin),
                                json={"member": "bob"})
    assert r.status_code == 201
    r = await stack.ingest.get("/v1/admin/audit/verify", headers=auth(alpha.admin))
    assert r.status_code == 200, r.text
    verified = r.json()
    assert verified["ok"] is True and verified["problems"] == []
    assert verified["rows"] >= 5  # bank.create, member.add, three token.issue, the new one
    r = await stack.ingest.get("/v1/admin/audit/export", headers=auth(alpha.admin))
    assert r.status_code == 200
    *rows, head = [json.loads(line) for line in r.text.splitlines()]
    assert len(rows) == verified["rows"]
    # The last line: the chain's head as recorded outside the database.
    assert head == {"audit_head": verified["head"]} and head["audit_head"]["id"] == rows[-1]["id"]
    assert {row["bank_id"] for row in rows} == {rows[0]["bank_id"]}
    assert any(row["action"] == "token.issue" for row in rows)
    # An edited row breaks the chain, and verify says which.
    await tamper(conn, "UPDATE audit_log SET target = 'tampered' WHERE id = $1", rows[-1]["id"])
    r = await stack.ingest.get("/v1/admin/audit/verify", headers=auth(alpha.admin))
    assert r.json()["ok"] is False
    assert r.json()["problems"][0]["audit_id"] == rows[-1]["id"]
