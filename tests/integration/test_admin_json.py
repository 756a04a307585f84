"""every `factbank admin` command answers `--json` with one JSON document."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_every_admin_command_answers_json(dsn):
    env = {**os.environ, "DATABASE_URL": dsn}

    def admin(*args: str):
        done = subprocess.run([sys.executable, "-m", "factbank_client.cli.main", "admin",
                               *args, "--json"], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return json.loads(done.stdout)

    bank = admin("bank", "create", "crew", "--kind", "team", "--policy", "reject")
    assert (bank["name"], bank["kind"], bank["redaction_policy"]) == ("crew", "team", "reject")
    assert admin("bank", "policy", "crew", "redact") == {"bank": "crew",
                                                         "redaction_policy": "redact"}
    assert [b["name"] for b in admin("bank", "list")] == ["crew"]
    member = admin("member", "add", "crew", "bob")
    assert member["member"] == "bob" and isinstance(member["id"], int)
    issued = admin("token", "issue", "crew", "bob", "--scopes", "read")
    assert issued["token"].startswith("fb_") and issued["member"] == "bob"
    rotated = admin("token", "rotate", str(issued["id"]))
    revoked = admin("token", "revoke", str(rotated["id"]))
    assert revoked["id"] == rotated["id"] and "token" not in revoked
    assert {t["id"] for t in admin("token", "list", "crew")} == {issued["id"], rotated["id"]}
    assert admin("audit", "verify")["ok"] is True
