"""The ops scripts, without a database and without a network beyond 127.0.0.1.

- ops/backup and ops/restore run as the operator runs them, against fake pg_dump /
  pg_restore / psql binaries selected by PG_BIN (the real restore drill is an integration
  test): verified dumps only, rotation to the newest N, a failed run deletes nothing old.
- ops/backup-loop: its schedule, its healthcheck, and a clean stop on SIGTERM.
- ops/check-exposure against tiny http.servers on loopback (401 without a token, 200 with
  it) and closed or open TCP ports standing in for Postgres and Redis.
- ops/tailscale/acl.hujson and ops/init-env.
"""

from __future__ import annotations

import fcntl
import http.server
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "ops"
DUMP_RE = re.compile(r"^factbank-\d{8}T\d{6}Z\.dump$")
DAY = 86400.0


def load_script(name: str) -> ModuleType:
    """Import an extension-less ops script as a module (its main() is not run)."""
    path = OPS / name
    loader = importlib.machinery.SourceFileLoader("ops_" + name.replace("-", "_"), str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up there
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["backup", "restore", "backup-loop", "check-exposure", "init-env"])
def test_scripts_are_executable_python(name: str) -> None:
    path = OPS / name
    assert path.stat().st_mode & stat.S_IXUSR, f"ops/{name} must be executable"
    assert path.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")


# --- fake Postgres client binaries ----------------------------------------------------------

FAKE_PG_DUMP = """
import json, os, sys
log = os.environ["FAKE_LOG"]
with open(log, "a") as fh:
    fh.write(json.dumps({"tool": "pg_dump", "argv": sys.argv[1:],
                         "pgpassword": os.environ.get("PGPASSWORD")}) + "\\n")
mode = os.environ.get("FAKE_DUMP_MODE", "ok")
target = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--file="))
if mode == "fail":
    sys.stderr.write("pg_dump: error: connection to server failed\\n")
    sys.exit(1)
if mode == "nofile":
    sys.exit(0)
with open(target, "wb") as fh:
    fh.write(b"NOT A DUMP" if mode == "garbage" else b"PGDMP\\x01\\x0f fake archive")
sys.exit(0)
"""

FAKE_PG_RESTORE = """
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps({"tool": "pg_restore", "argv": args,
                         "pgpassword": os.environ.get("PGPASSWORD")}) + "\\n")
if "--list" in args:
    with open(args[-1], "rb") as fh:
        ok = fh.read(5) == b"PGDMP" and os.environ.get("FAKE_LIST_MODE", "ok") == "ok"
    if not ok:
        sys.stderr.write("pg_restore: error: input file does not appear to be a valid archive\\n")
        sys.exit(1)
    print(";\\n; Archive created at 2026-01-01\\n;\\n1; 2615 2200 SCHEMA - public pg")
    sys.exit(0)
rc = int(os.environ.get("FAKE_RESTORE_RC", "0"))
if rc == 0:
    with open(os.environ["FAKE_RELATIONS_FILE"], "w") as fh:
        fh.write("3")
else:
    sys.stderr.write("pg_restore: error: could not execute query\\n")
sys.exit(rc)
"""

FAKE_PSQL = """
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps({"tool": "psql", "argv": sys.argv[1:],
                         "pgpassword": os.environ.get("PGPASSWORD")}) + "\\n")
with open(os.environ["FAKE_RELATIONS_FILE"]) as fh:
    print(fh.read().strip())
"""


class Fakes:
    def __init__(self, root: Path) -> None:
        self.bin = root / "pgbin"
        self.bin.mkdir()
        self.log = root / "calls.jsonl"
        self.log.touch()
        self.relations = root / "relations"
        self.relations.write_text("0")
        for name, body in (
            ("pg_dump", FAKE_PG_DUMP),
            ("pg_restore", FAKE_PG_RESTORE),
            ("psql", FAKE_PSQL),
        ):
            path = self.bin / name
            path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
            path.chmod(0o755)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "BACKUP_"))}
        env.update(
            PG_BIN=str(self.bin),
            FAKE_LOG=str(self.log),
            FAKE_RELATIONS_FILE=str(self.relations),
            DATABASE_URL="postgresql://factbank:pw@postgres:5432/factbank",
        )
        env.update(extra)
        return env

    def calls(self, tool: str | None = None) -> list[dict]:
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [r for r in rows if tool is None or r["tool"] == tool]


@pytest.fixture
def fakes(tmp_path: Path) -> Fakes:
    return Fakes(tmp_path)


@pytest.fixture
def backup_dir(tmp_path: Path) -> Path:
    path = tmp_path / "backups"
    path.mkdir()
    return path


def run_ops(
    name: str, *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(OPS / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def make_dumps(backup_dir: Path, ages_days: list[float]) -> list[Path]:
    """Fake verified dumps, named by their age and with that mtime; oldest last."""
    now = time.time()
    paths = []
    for age in ages_days:
        mtime = now - age * DAY
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(mtime))
        path = backup_dir / f"factbank-{stamp}.dump"
        path.write_bytes(b"PGDMP old")
        os.utime(path, (mtime, mtime))
        paths.append(path)
    return paths


def dumps(backup_dir: Path) -> set[Path]:
    return {p for p in backup_dir.iterdir() if DUMP_RE.match(p.name)}


def leftovers(backup_dir: Path) -> list[str]:
    return [p.name for p in backup_dir.iterdir() if p.name.endswith(".partial")]


# --- ops/backup -----------------------------------------------------------------------------


def test_backup_publishes_a_verified_dump_and_logs_its_size(fakes: Fakes, backup_dir: Path) -> None:
    result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir)))
    assert result.returncode == 0, result.stderr
    (new,) = dumps(backup_dir)
    assert new.read_bytes().startswith(b"PGDMP")
    assert stat.S_IMODE(new.stat().st_mode) == 0o600, "a dump holds every fact: owner only"
    assert not leftovers(backup_dir)
    assert f"{new.stat().st_size} bytes" in result.stderr
    (dump_call,) = fakes.calls("pg_dump")
    assert "--format=custom" in dump_call["argv"]
    # The dump was verified with pg_restore --list before it got its final name.
    (list_call,) = fakes.calls("pg_restore")
    assert list_call["argv"][0] == "--list"
    assert list_call["argv"][-1].endswith(".dump.partial")


def test_backup_saves_the_audit_heads_beside_the_dump_and_rotates_them(
    fakes: Fakes, backup_dir: Path, tmp_path: Path
) -> None:
    """every backup carries the audit chains' heads kept outside the database."""
    head = tmp_path / "head.json"
    head.write_text('{"databases": {}}')
    old = make_dumps(backup_dir, [1, 2])
    stale = old[1].with_name(old[1].name.removesuffix(".dump") + ".audit-head.json")
    stale.write_text("{}")
    env = fakes.env(BACKUP_DIR=str(backup_dir), BACKUP_KEEP="2", FACTBANK_AUDIT_HEAD=str(head))
    result = run_ops("backup", env=env)
    assert result.returncode == 0, result.stderr
    new = (dumps(backup_dir) - set(old)).pop()
    copy = new.with_name(new.name.removesuffix(".dump") + ".audit-head.json")
    assert copy.read_text() == head.read_text()
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert not stale.exists(), "rotated out with its dump"


def test_backup_keeps_the_password_off_the_command_line(fakes: Fakes, backup_dir: Path) -> None:
    env = fakes.env(
        BACKUP_DIR=str(backup_dir),
        DATABASE_URL="postgresql://factbank:s3cr%40t-pw@postgres:5432/factbank?sslmode=disable",
    )
    result = run_ops("backup", env=env)
    assert result.returncode == 0, result.stderr
    (call,) = fakes.calls("pg_dump")
    assert call["pgpassword"] == "s3cr@t-pw"
    joined = " ".join(call["argv"])
    assert "s3cr" not in joined
    assert "--dbname=postgresql://factbank@postgres:5432/factbank?sslmode=disable" in joined
    assert "s3cr" not in result.stderr + result.stdout


def test_rotation_keeps_the_newest_seven(fakes: Fakes, backup_dir: Path) -> None:
    old = make_dumps(backup_dir, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir)))
    assert result.returncode == 0, result.stderr
    remaining = dumps(backup_dir)
    assert len(remaining) == 7
    new = remaining - set(old)
    assert len(new) == 1, "the dump just made is kept"
    assert remaining - new == set(old[:6]), "the six newest old dumps are kept"
    assert "rotated out" in result.stderr


def test_rotation_honours_backup_keep(fakes: Fakes, backup_dir: Path) -> None:
    old = make_dumps(backup_dir, [1, 2, 3])
    env = fakes.env(BACKUP_DIR=str(backup_dir), BACKUP_KEEP="2")
    assert run_ops("backup", env=env).returncode == 0
    remaining = dumps(backup_dir)
    assert len(remaining) == 2 and old[0] in remaining


@pytest.mark.parametrize(
    "mode",
    [
        {"FAKE_DUMP_MODE": "fail"},  # pg_dump itself fails
        {"FAKE_DUMP_MODE": "nofile"},  # exits 0 but wrote nothing
        {"FAKE_DUMP_MODE": "garbage"},  # wrote something that is no archive
        {"FAKE_LIST_MODE": "fail"},  # looks like an archive, pg_restore --list rejects it
    ],
    ids=["dump-fails", "no-file", "garbage", "list-fails"],
)
def test_a_failed_or_unverifiable_dump_is_deleted_and_nothing_old_is(
    fakes: Fakes, backup_dir: Path, mode: dict[str, str]
) -> None:
    old = make_dumps(backup_dir, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir), **mode))
    assert result.returncode == 1, result.stderr
    assert dumps(backup_dir) == set(old), "a failed run must not rotate anything out"
    assert not leftovers(backup_dir), "the partial dump is deleted"
    assert "FAILED" in result.stderr


def test_the_only_good_copy_survives_a_failed_run(fakes: Fakes, backup_dir: Path) -> None:
    (only,) = make_dumps(backup_dir, [30])
    for mode in ({"FAKE_DUMP_MODE": "fail"}, {"FAKE_LIST_MODE": "fail"}):
        result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir), **mode))
        assert result.returncode == 1
        assert dumps(backup_dir) == {only}


def test_a_future_mtime_cannot_rotate_out_the_new_dump(fakes: Fakes, backup_dir: Path) -> None:
    # Seven dumps whose clocks ran ahead: by mtime they all look newer than tonight's.
    old = make_dumps(backup_dir, [-1, -2, -3, -4, -5, -6, -7])
    result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir)))
    assert result.returncode == 0, result.stderr
    remaining = dumps(backup_dir)
    assert len(remaining) == 7
    assert len(remaining - set(old)) == 1, "the dump just made is always kept"


def test_backup_leaves_other_files_alone(fakes: Fakes, backup_dir: Path) -> None:
    make_dumps(backup_dir, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    others = ["notes.txt", "factbank-manual.dump", "factbank-20200101T000000Z.dump.bak"]
    for name in others:
        path = backup_dir / name
        path.write_text("keep me")
        os.utime(path, (0, 0))
    assert run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir))).returncode == 0
    for name in others:
        assert (backup_dir / name).exists()


def test_backup_removes_a_partial_left_by_a_killed_run(fakes: Fakes, backup_dir: Path) -> None:
    stale = backup_dir / ".factbank-20200101T000000Z.dump.partial"
    stale.write_bytes(b"PGDMP half")
    assert run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir))).returncode == 0
    assert not stale.exists()


def test_a_second_concurrent_backup_does_not_start(fakes: Fakes, backup_dir: Path) -> None:
    with open(backup_dir / ".factbank-backup.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(backup_dir)))
    assert result.returncode == 3
    assert not fakes.calls("pg_dump")


def test_backup_usage_errors(fakes: Fakes, tmp_path: Path) -> None:
    assert run_ops("backup", env=fakes.env()).returncode == 2, "no BACKUP_DIR"
    env = fakes.env(BACKUP_DIR=str(tmp_path / "b"))
    assert run_ops("backup", "--keep", "0", env=env).returncode == 2
    result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(tmp_path / "b"), DATABASE_URL=""))
    assert result.returncode == 2 and "DATABASE_URL" in result.stderr
    result = run_ops("backup", env=fakes.env(BACKUP_DIR=str(tmp_path / "b"), PG_BIN="/nonexistent"))
    assert result.returncode == 2 and "PG_BIN" in result.stderr
    assert not fakes.calls("pg_dump")


def test_plan_rotation_unit() -> None:
    backup = load_script("backup")
    base = Path("/b")
    items = [
        backup.Dump(base / f"factbank-2026010{i}T000000Z.dump", float(i)) for i in range(1, 10)
    ]
    newest = items[-1].path
    doomed = backup.plan_rotation(items, 7, newest)
    assert {d.path for d in doomed} == {items[0].path, items[1].path}
    # keep below 1 still keeps one; the protected dump is the one kept.
    assert [d.path for d in items if d not in backup.plan_rotation(items, 0, newest)] == [newest]
    # A protected path that is not among the dumps (it vanished?): delete nothing.
    assert backup.plan_rotation(items, 1, base / "factbank-missing.dump") == []
    # Fewer dumps than keep: nothing to do.
    assert backup.plan_rotation(items[:3], 7, items[2].path) == []


def test_split_dsn_unit() -> None:
    pgtools = load_script("pgtools.py")
    assert pgtools.split_dsn("postgresql://u:p%2Fw@h:5432/db?x=1") == (
        "postgresql://u@h:5432/db?x=1",
        "p/w",
    )
    assert pgtools.split_dsn("postgres+asyncpg://u@h/db") == ("postgresql://u@h/db", None)
    assert pgtools.split_dsn("host=h dbname=db") == ("host=h dbname=db", None)
    assert pgtools.describe_dsn("postgresql://u:secret@h:5432/db") == "h:5432/db"


# --- ops/restore ----------------------------------------------------------------------------


@pytest.fixture
def a_dump(tmp_path: Path) -> Path:
    path = tmp_path / "factbank-20260101T000000Z.dump"
    path.write_bytes(b"PGDMP archive")
    return path


def test_restore_refuses_a_database_that_has_tables(fakes: Fakes, a_dump: Path) -> None:
    fakes.relations.write_text("12")
    result = run_ops("restore", str(a_dump), env=fakes.env())
    assert result.returncode == 4
    assert "not empty" in result.stderr
    restores = [c for c in fakes.calls("pg_restore") if "--list" not in c["argv"]]
    assert not restores, "pg_restore must not touch a database in use"


def test_restore_into_an_empty_database(fakes: Fakes, a_dump: Path) -> None:
    env = fakes.env(DATABASE_URL="postgresql://factbank:pw@db:5432/fresh")
    result = run_ops("restore", str(a_dump), env=env)
    assert result.returncode == 0, result.stderr
    (restore,) = [c for c in fakes.calls("pg_restore") if "--list" not in c["argv"]]
    for flag in ("--no-owner", "--exit-on-error", "--single-transaction"):
        assert flag in restore["argv"]
    assert "--dbname=postgresql://factbank@db:5432/fresh" in restore["argv"]
    assert restore["pgpassword"] == "pw"
    assert restore["argv"][-1] == str(a_dump)
    assert "3 tables" in result.stderr
    # The emptiness check ran before the restore.
    tools = [c["tool"] for c in fakes.calls()]
    assert tools.index("psql") < len(tools) - 1 - tools[::-1].index("pg_restore")


def test_restore_refuses_an_unverifiable_dump(fakes: Fakes, tmp_path: Path) -> None:
    bad = tmp_path / "factbank-20260101T000000Z.dump"
    bad.write_bytes(b"truncated")
    result = run_ops("restore", str(bad), env=fakes.env())
    assert result.returncode == 1
    assert not fakes.calls("psql")


def test_restore_reports_a_failed_restore(fakes: Fakes, a_dump: Path) -> None:
    result = run_ops("restore", str(a_dump), env=fakes.env(FAKE_RESTORE_RC="1"))
    assert result.returncode == 1
    assert "rolled back" in result.stderr


def test_restore_takes_an_explicit_target(fakes: Fakes, a_dump: Path) -> None:
    env = fakes.env(DATABASE_URL="")
    result = run_ops("restore", str(a_dump), "--dbname", "postgresql://u@h/other", env=env)
    assert result.returncode == 0, result.stderr
    (restore,) = [c for c in fakes.calls("pg_restore") if "--list" not in c["argv"]]
    assert "--dbname=postgresql://u@h/other" in restore["argv"]


def test_restore_into_another_database_on_the_same_server(fakes: Fakes, a_dump: Path) -> None:
    env = fakes.env(DATABASE_URL="postgresql://factbank:pw@postgres:5432/factbank?sslmode=disable")
    result = run_ops("restore", str(a_dump), "--database", "factbank_restore", env=env)
    assert result.returncode == 0, result.stderr
    (restore,) = [c for c in fakes.calls("pg_restore") if "--list" not in c["argv"]]
    assert (
        "--dbname=postgresql://factbank@postgres:5432/factbank_restore?sslmode=disable"
        in (restore["argv"])
    )
    assert restore["pgpassword"] == "pw"
    for call in fakes.calls("psql"):
        assert any(a.endswith("/factbank_restore?sslmode=disable") for a in call["argv"])


# --- ops/backup-loop ------------------------------------------------------------------------


def test_backup_loop_schedule_follows_the_newest_dump(backup_dir: Path) -> None:
    loop = load_script("backup-loop")
    assert loop.next_delay(None, DAY) == 0, "no dump yet: back up now"
    assert loop.next_delay(DAY + 5, DAY) == 0, "due"
    assert loop.next_delay(DAY - 100, DAY) == pytest.approx(100)
    assert loop.newest_dump_age(backup_dir) is None
    make_dumps(backup_dir, [3, 0.5])
    assert loop.newest_dump_age(backup_dir) == pytest.approx(0.5 * DAY, abs=60)
    assert loop.newest_dump_age(backup_dir / "missing") is None


@pytest.mark.parametrize(("ages", "rc"), [([], 1), ([0.2], 0), ([2, 3], 1)])
def test_backup_loop_check(backup_dir: Path, ages: list[float], rc: int) -> None:
    make_dumps(backup_dir, ages)
    env = {**os.environ, "BACKUP_DIR": str(backup_dir), "BACKUP_INTERVAL": str(DAY)}
    assert run_ops("backup-loop", "--check", env=env).returncode == rc


def test_backup_loop_backs_up_then_stops_on_sigterm(fakes: Fakes, backup_dir: Path) -> None:
    env = fakes.env(BACKUP_DIR=str(backup_dir), BACKUP_INTERVAL="3600", BACKUP_RETRY="3600")
    proc = subprocess.Popen(
        [sys.executable, str(OPS / "backup-loop")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not dumps(backup_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(dumps(backup_dir)) == 1
        time.sleep(0.5)  # now waiting for the next day
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "next backup in 1.0 h" in err
    assert len(dumps(backup_dir)) == 1, "a restart-like second pass must not dump again"


# --- ops/check-exposure ---------------------------------------------------------------------

TOKEN = "fb_test_token_0123456789abcdef"


class FakeService(http.server.BaseHTTPRequestHandler):
    """/healthz 200; everything else 401 unless `Bearer TOKEN` (the server's `policy`)."""

    def do_GET(self) -> None:
        policy = self.server.policy  # type: ignore[attr-defined]
        auth = self.headers.get("Authorization", "")
        if self.path == "/healthz":
            status = 200
        elif policy == "open":
            status = 200
        elif policy == "any-bearer":
            status = 200 if auth.startswith("Bearer ") else 401
        elif policy == "redirect" and not auth:
            status = 302
        elif policy == "reject-all":
            status = 401
        else:
            status = 200 if auth == f"Bearer {TOKEN}" else 401
        body = b'{"status": "ok"}'
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "/login")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def service() -> Iterator:
    servers = []

    def start(policy: str = "token") -> int:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeService)
        server.policy = policy  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closed_port() -> Iterator:
    """Ports that refuse connections: bound (so nothing else takes them) but not listening."""
    socks = []

    def make() -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
        return sock.getsockname()[1]

    yield make
    for sock in socks:
        sock.close()


def exposure(ingest: int, recall: int, pg: int, redis: int, *extra: str, token: str | None = TOKEN):
    args = ["127.0.0.1"] + ([token] if token else [])
    args += ["--ingest-port", str(ingest), "--recall-port", str(recall)]
    args += ["--postgres-port", str(pg), "--redis-port", str(redis), "--timeout", "2", *extra]
    env = {k: v for k, v in os.environ.items() if k != "FACTBANK_TOKEN"}
    return run_ops("check-exposure", *args, env=env)


def test_exposure_all_pass(service, closed_port) -> None:
    result = exposure(service(), service(), closed_port(), closed_port())
    assert result.returncode == 0, result.stdout
    assert "all 10 checks passed" in result.stdout
    assert result.stdout.count("PASS") == 10
    assert "without a token -> 401" in result.stdout
    assert "with the token -> 200" in result.stdout
    assert "loopback" in result.stdout, "it warns that loopback proves nothing"
    assert TOKEN not in result.stdout + result.stderr, "the token is never printed"


def test_exposure_token_from_env(service, closed_port) -> None:
    args = ["127.0.0.1", "--ingest-port", str(service()), "--recall-port", str(service())]
    args += ["--postgres-port", str(closed_port()), "--redis-port", str(closed_port())]
    result = run_ops("check-exposure", *args, env={**os.environ, "FACTBANK_TOKEN": TOKEN})
    assert result.returncode == 0, result.stdout


def test_exposure_needs_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "FACTBANK_TOKEN"}
    assert run_ops("check-exposure", "127.0.0.1", env=env).returncode == 2


@pytest.mark.parametrize(
    ("policy", "failing"),
    [
        ("open", "without a token -> 200"),
        ("any-bearer", "with a wrong token -> 200"),
        ("reject-all", "with the token -> 401"),
        ("redirect", "without a token -> 302"),
    ],
)
def test_exposure_fails_on_a_wrong_answer(service, closed_port, policy: str, failing: str) -> None:
    result = exposure(service(), service(policy), closed_port(), closed_port())
    assert result.returncode == 1
    fail_lines = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert fail_lines and all("recall" in line for line in fail_lines)
    assert any(failing in line for line in fail_lines)


def test_exposure_fails_when_postgres_or_redis_answers(service, closed_port) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        open_port = listener.getsockname()[1]
        for pg, redis, name in (
            (open_port, closed_port(), "postgres"),
            (closed_port(), open_port, "redis"),
        ):
            result = exposure(service(), service(), pg, redis)
            assert result.returncode == 1
            (fail,) = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
            assert name in fail and "EXPOSED" in fail
    finally:
        listener.close()


def test_exposure_fails_when_a_service_is_down(service, closed_port) -> None:
    result = exposure(closed_port(), service(), closed_port(), closed_port())
    assert result.returncode == 1
    assert re.search(r"FAIL\s+ingest .*unreachable", result.stdout)


# --- the tailnet policy and the env file ----------------------------------------------------


def parse_hujson(text: str) -> dict:
    """HuJSON: JSON plus // and /* */ comments and trailing commas (none inside strings here)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = "\n".join(
        re.sub(r'^((?:[^"\n]|"[^"\n]*")*?)//.*$', r"\1", line) for line in text.splitlines()
    )
    text = re.sub(r",(\s*[}\]])", r"\1", text)
    return json.loads(text)


def test_tailnet_policy_lets_only_agents_reach_the_two_ports() -> None:
    policy = parse_hujson((OPS / "tailscale" / "acl.hujson").read_text(encoding="utf-8"))
    assert set(policy["tagOwners"]) == {"tag:factbank", "tag:agent"}
    rules_to_factbank = [
        rule for rule in policy["acls"] if any(d.startswith("tag:factbank") for d in rule["dst"])
    ]
    assert rules_to_factbank, "a rule must let agents reach factbank"
    for rule in rules_to_factbank:
        assert rule["action"] == "accept"
        assert rule["src"] == ["tag:agent"]
        assert rule["dst"] == ["tag:factbank:8701,8702"]
    (test,) = policy["tests"]
    assert test["src"] == "tag:agent"
    assert set(test["accept"]) == {"tag:factbank:8701", "tag:factbank:8702"}
    assert {"tag:factbank:5432", "tag:factbank:6379"} <= set(test["deny"])


def test_init_env_writes_a_private_file_with_one_random_password(tmp_path: Path) -> None:
    target = tmp_path / "factbank.env"
    result = run_ops("init-env", str(target), env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    values = dict(
        line.split("=", 1) for line in target.read_text().splitlines() if line and line[0] != "#"
    )
    password = values["POSTGRES_PASSWORD"]
    assert len(password) >= 32
    assert values["DATABASE_URL"] == f"postgresql://factbank:{password}@postgres:5432/factbank"
    assert re.fullmatch(r"[0-9a-f]{64}", values["FACTBANK_AUDIT_KEY"])  # its own, no default
    again = run_ops("init-env", str(target), env=dict(os.environ))
    assert again.returncode == 1, "never overwrite: the database keeps its first password"
    assert f"POSTGRES_PASSWORD={password}" in target.read_text()


def test_env_example_holds_no_usable_password() -> None:
    text = (OPS / "factbank.env.example").read_text(encoding="utf-8")
    assert re.search(r"^POSTGRES_PASSWORD=$", text, re.M), (
        "empty in the example: the postgres image refuses to initialise with no password"
    )
    assert "SAME-PASSWORD-HERE" in text
