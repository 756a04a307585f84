"""Past one machine, in the real stack: compose.scale.yaml with the `replica`, `workers` and
`scale` profiles, two copies of ingest, of recall and of the vector worker behind the balancer,
and recall reading a streaming standby.

Checked through the balancer's published ports (as an agent reaches it) and inside each copy
(`docker exec`, for what must hold per copy): every copy serves; a writer reads its own write
while the standby's replay is paused; the copies' result caches are invalidated together; no
queued fact is claimed by two workers and none is left; a timeline conflict is found when its
two sides reach two different ingest copies; the load drill's smoke shows no 5xx and no lost
write. The drill itself (20 agents) runs by hand: `python -m factbank_evals.load_drill`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from factbank_evals import load_drill
from tests.compose.stack import COMPOSE, COMPOSE_CI, ROOT, Stack, fact, use_public_images

BIND = os.environ.get("FACTBANK_COMPOSE_SCALE_BIND", "127.0.0.75")
COPIES = {"ingest": 2, "recall": 2, "worker": 2}
PROFILES = "scale,workers,replica"


def _env_file(stack_dir) -> tuple[object, str]:
    from tests.compose.stack import write_env_file

    path = write_env_file(stack_dir / "factbank.env")
    metrics = secrets.token_urlsafe(24)
    text = path.read_text()
    # what a user does to turn the replica on: uncomment the line ops/init-env wrote
    text = text.replace("# DATABASE_URL_READ=", "DATABASE_URL_READ=")
    path.write_text(text + f"FACTBANK_METRICS_TOKEN={metrics}\n")
    return path, metrics


class Scaled(Stack):
    metrics: str = ""

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, "COMPOSE_PROFILES": PROFILES}

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "--quiet", service).stdout.split()

    def inside(self, cid: str, method: str, path: str, body: dict | None = None,
               token: str | None = None, port: int = 8701) -> dict:
        """A request to one copy, from inside its own container (copies publish nothing)."""
        script = (
            "import json, sys, urllib.request\n"
            "a = json.loads(sys.argv[1])\n"
            "req = urllib.request.Request(a['url'], method=a['method'],"
            " data=a['data'].encode() if a['data'] else None, headers=a['headers'])\n"
            "with urllib.request.urlopen(req, timeout=30) as r:\n"
            "    print(json.dumps({'status': r.status, 'body': r.read().decode()}))\n"
        )
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        arg = json.dumps({"url": f"http://127.0.0.1:{port}{path}", "method": method,
                          "data": json.dumps(body) if body is not None else "",
                          "headers": headers})
        out = self.engine.docker("exec", cid, "python", "-c", script, arg).stdout
        return json.loads(out)

    def metric(self, cid: str, port: int, name: str, **labels: str) -> float:
        text = self.inside(cid, "GET", "/metrics", token=self.metrics, port=port)["body"]
        want = ",".join(f'{k}="{v}"' for k, v in labels.items())
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") and all(
                    f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
            elif want == "" and line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total


@pytest.fixture(scope="module")
def scaled(engine, images, stack, tmp_path_factory, report) -> Iterator[Scaled]:
    """Started after the main stack's tests (module scope), removed with its volumes."""
    env_file, metrics = _env_file(tmp_path_factory.mktemp("fbci-scale"))
    # compose.ci.yaml last: its local balancer image replaces compose.scale.yaml's public one
    files = [COMPOSE, ROOT / "compose.scale.yaml"] + ([] if use_public_images() else [COMPOSE_CI])
    s = Scaled(engine, "fbci-scale", BIND, env_file, files=files)
    s.metrics = metrics
    s.compose("down", "--volumes", "--timeout", "5", check=False)
    start = time.monotonic()
    scale = [a for name, n in COPIES.items() for a in ("--scale", f"{name}={n}")]
    r = s.compose("up", "--detach", "--wait", "--wait-timeout", "420", *scale,
                  check=False, timeout=600)
    if r.returncode != 0:
        logs = s.compose("logs", "--no-color", "--tail", "40", check=False).stdout
        raise RuntimeError(f"scaled up --wait failed:\n{r.stderr[-3000:]}\n{logs[-8000:]}")
    running = {c["Service"] for c in s.ps() if c.get("State") == "running"}
    assert {"balancer", "postgres-replica", *COPIES} <= running, (running, r.stdout, r.stderr)
    report["scaled stack up --wait (2 ingest, 2 recall, 2 workers, replica, balancer)"] = (
        f"{time.monotonic() - start:.0f} s")
    try:
        yield s
    finally:
        s.compose("logs", "--no-color", "--tail", "20", check=False)
        s.down(volumes=True)


@pytest.fixture(scope="module")
def token(scaled: Scaled) -> str:
    return scaled.issue_token("scale", "ann", "read,write,admin")


def _replica_sql(s: Scaled, sql: str) -> str:
    return s.engine.docker(
        "exec", s.containers("postgres-replica")[0], "psql", "--username=factbank",
        "--dbname=factbank", "--no-psqlrc", "--tuples-only", "--no-align", f"--command={sql}",
    ).stdout.strip()


def test_every_copy_runs_and_the_replica_streams(scaled: Scaled) -> None:
    for name, n in COPIES.items():
        cids = scaled.containers(name)
        assert len(cids) == n, name
    assert _replica_sql(scaled, "SELECT pg_is_in_recovery()") == "t"
    assert scaled.psql(
        "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == "1"
    with scaled.http() as http:
        for url in (scaled.ingest_url, scaled.recall_url):
            assert http.get(f"{url}/readyz").status_code == 200


def test_requests_spread_over_every_copy(scaled: Scaled, token: str) -> None:
    """The balancer's health checks reach every copy anyway: count only /v1/stats."""
    with scaled.http(token) as http:
        for _ in range(24):
            assert http.get(f"{scaled.recall_url}/v1/stats").status_code == 200
    served = [scaled.metric(cid, 8702, "factbank_requests_total", path="/v1/stats")
              for cid in scaled.containers("recall")]
    assert sum(served) >= 24 and all(n > 0 for n in served), served


def test_a_writer_reads_its_own_write_while_the_replica_lags(scaled: Scaled, token: str) -> None:
    _replica_sql(scaled, "SELECT pg_wal_replay_pause()")
    try:
        with scaled.http(token) as http:
            r = http.post(f"{scaled.ingest_url}/v1/facts",
                          json=fact("The scaled stack's cache host is cache-7", tags=["cache"]))
            assert r.status_code == 201, r.text
            version = r.headers["x-factbank-version"]
            q = {"query": "cache-7 cache host", "mode": "lexical", "floor": False}
            for _ in range(4):  # whichever recall copy answers
                stale = http.post(f"{scaled.recall_url}/v1/search", json=q).json()
                assert "cache-7" not in json.dumps(stale["results"])
                fresh = http.post(f"{scaled.recall_url}/v1/search", json=q,
                                  headers={"X-Factbank-Min-Version": version}).json()
                assert "cache-7" in fresh["results"][0]["fact"]["content"]
    finally:
        _replica_sql(scaled, "SELECT pg_wal_replay_resume()")


def test_result_cache_invalidation_reaches_every_recall_copy(scaled: Scaled, token: str) -> None:
    recalls = scaled.containers("recall")
    with scaled.http(token) as http:
        r = http.post(f"{scaled.ingest_url}/v1/facts",
                      json=fact("Invoices are rendered by the pdf-forge service",
                                tags=["invoices"]))
        assert r.status_code == 201, r.text
        fact_id, version = r.json()["fact"]["id"], r.headers["x-factbank-version"]
    q = {"query": "which service renders invoices", "floor": False}
    for cid in recalls:  # both copies cache the answer
        hit = scaled.inside(cid, "POST", "/v1/search", q, token, 8702)
        assert "pdf-forge" in hit["body"], hit
    with scaled.http(token) as http:
        r = http.delete(f"{scaled.ingest_url}/v1/facts/{fact_id}")
        assert r.status_code in (200, 204), r.text
    time.sleep(1.0)  # the replica replays the delete
    for cid in recalls:
        hit = scaled.inside(cid, "POST", "/v1/search", q, token, 8702)
        assert "pdf-forge" not in hit["body"], (cid, hit)
    del version


def test_workers_claim_each_queued_fact_once_and_leave_none(scaled: Scaled, token: str) -> None:
    workers = scaled.containers("worker")
    before = sum(scaled.metric(c, 8703, "factbank_vector_queue_total", result="claimed")
                 for c in workers)
    n = 40
    lines = "".join(json.dumps(fact(f"Scaled import fact {i}: shard {i} lives on node-{i}",
                                    tags=["shard"])) + "\n" for i in range(n))
    with scaled.http(token, timeout=120) as http:
        r = http.post(f"{scaled.ingest_url}/v1/facts/import", params={"vectors": "queue"},
                      content=lines)
        assert r.status_code == 201, r.text
        deadline = time.monotonic() + 300
        while http.get(f"{scaled.recall_url}/v1/stats").json()["vectors_pending"]:
            assert time.monotonic() < deadline, "the workers left facts behind"
            time.sleep(1)
    per_worker = [scaled.metric(c, 8703, "factbank_vector_queue_total", result="claimed")
                  for c in workers]
    assert sum(per_worker) - before == n, per_worker
    for cid in scaled.containers("ingest"):  # ingest runs no worker of its own here
        assert scaled.metric(cid, 8701, "factbank_vector_queue_total", result="claimed") == 0
    assert scaled.psql("SELECT count(*) FROM vector_queue") == "0"


def test_a_conflict_is_found_when_its_sides_reach_two_ingest_copies(
        scaled: Scaled, token: str) -> None:
    first, second = scaled.containers("ingest")[:2]
    other = scaled.issue_token("scale", "bob", "read,write")
    now = datetime.now(UTC).isoformat()

    def events(session: str, agent: str) -> dict:
        return {"events": [
            {"session_id": session, "kind": "session_start", "project": "github.com/acme/s",
             "agent": agent, "machine": agent + "-box", "branch": "main"},
            {"session_id": session, "kind": "file", "project": "github.com/acme/s",
             "path": "src/shared.py", "at": now}]}

    a = scaled.inside(first, "POST", "/v1/timeline/events", events("s-a", "codex"), token)
    assert a["status"] == 201 and json.loads(a["body"])["conflicts"] == []
    b = scaled.inside(second, "POST", "/v1/timeline/events", events("s-b", "claude-code"), other)
    assert b["status"] == 201
    (conflict,) = json.loads(b["body"])["conflicts"]
    assert conflict["path"] == "src/shared.py" and conflict["member"] == "ann"


def test_load_drill_smoke_through_the_balancer(scaled: Scaled, report) -> None:
    token = scaled.issue_token("scaleload", "agent", "read,write")
    target = load_drill.Target("scaled", scaled.ingest_url, scaled.recall_url, token)
    result = load_drill.run(target, agents=4, duration=8, think=0.2, seed_facts=30)
    assert result["errors_5xx"] == 0, result["errors"]
    assert result["lost_writes"] == 0
    report["load drill smoke, scaled (4 agents, 8 s)"] = (
        f"{result['calls']} calls, {result['throughput']:.1f}/s, 0 5xx, 0 lost")
