"""Load drill: N simulated agents against the embedded default and the compose stack.

    python -m factbank_evals.load_drill                      # both targets, 20 agents, 60 s each
    python -m factbank_evals.load_drill --target compose --agents 30 --duration 120
    python -m factbank_evals.load_drill --json out.json

Each agent is a thread that behaves like a coding agent's session: the real hook process
(`hooks.py SessionStart`, then `UserPromptSubmit` for every prompt, run as the harnesses run
it), and over HTTP a search, now and then an add, and a confirm of something it found. It
records every call's wall time and status; after the run every fact an agent was told was
stored is looked up by id (lost writes).

Per target it prints throughput, p50/p95/p99 per route, errors by kind (the target is no
5xx), lost writes (target 0), the recall cache hit rates (`/v1/stats`) and the most
Postgres connections seen at once (the services' pools, sampled from pg_stat_activity).
Then the ratio compose / embedded. Everything is bounded: the duration per target, the
agents' count, a think time between actions, and a cap on calls per agent.

Targets, both started and stopped by the drill:
- embedded: `factbank up` with a fresh FACTBANK_HOME, on FACTBANK_HOST=127.0.0.76 (no Redis:
  the in-process cache);
- compose: the stack from tests/compose (a Docker engine, local images as in CI), published
  on 127.0.0.77.
`--url-ingest/--url-recall/--token` aim it at a running server instead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from factbank_evals.metrics import percentile

ROOT = Path(__file__).resolve().parents[1]
HOOK_SCRIPT = ROOT / "clients" / "factbank_client" / "hooks.py"
SERVICES = ["api", "billing", "search", "auth", "gateway", "worker", "cron", "mailer"]
TOPICS = [
    ("listens on port {n}", "which port does {svc} listen on"),
    ("is deployed by the {svc}-deploy pipeline, job {n}", "how is {svc} deployed"),
    ("keeps its logs in /var/log/{svc}/{n}.log", "where are the {svc} logs"),
    ("使用 {n} 号端口", "{svc} 用哪个端口"),
]
MAX_CALLS_PER_AGENT = 5000


@dataclass
class Target:
    name: str
    ingest: str
    recall: str
    token: str
    connections: Callable[[], int] | None = None


@dataclass
class Record:
    lat: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    acked: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, route: str, seconds: float, error: str | None = None) -> None:
        with self.lock:
            self.lat[route].append(seconds)
            if error:
                self.errors[f"{route} {error}"] += 1


def fact_for(agent: int, n: int) -> dict:
    svc = SERVICES[(agent + n) % len(SERVICES)]
    template, _ = TOPICS[n % len(TOPICS)]
    claim = f"{svc}-{agent} " + template.format(n=1000 + n, svc=svc)
    return {
        "content": claim,
        "category": "environment",
        "source": {"kind": "user", "location": f"agent-{agent}"},
        "quote": claim,
        "tags": [svc, f"agent{agent}", "load"],
    }


def query_for(agent: int, n: int) -> str:
    svc = SERVICES[(agent * 7 + n) % len(SERVICES)]
    _, question = TOPICS[n % len(TOPICS)]
    return question.format(svc=f"{svc}-{(agent + n) % 20}")


def _timed(record: Record, route: str, call: Callable[[], httpx.Response]) -> httpx.Response | None:
    start = time.monotonic()
    try:
        r = call()
    except httpx.HTTPError as exc:
        record.add(route, time.monotonic() - start, f"transport {type(exc).__name__}")
        return None
    error = None if r.status_code < 400 else str(r.status_code)
    record.add(route, time.monotonic() - start, error)
    return r


def _hook(record: Record, event: str, payload: dict, env: dict[str, str], cwd: Path) -> None:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(HOOK_SCRIPT), event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=30,
    )
    error = None
    if proc.returncode != 0:
        error = f"exit {proc.returncode}"
    elif proc.stdout:
        try:
            json.loads(proc.stdout)
        except ValueError:
            error = "bad output"
    record.add(f"hook {event}", time.monotonic() - start, error)


def agent_loop(
    i: int, target: Target, record: Record, until: float, think: float, home: Path
) -> None:
    rng = random.Random(i)
    cfg = home / f"agent{i}.toml"
    cfg.write_text(
        f'url = "{target.ingest}"\nrecall_url = "{target.recall}"\n'
        f'[banks.personal]\ntoken = "{target.token}"\n'
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "FACTBANK_CONFIG": str(cfg),
        "LANG": "C.UTF-8",
    }
    session = f"load-{i}-{int(time.time())}"
    base = {"session_id": session, "cwd": str(home), "transcript_path": ""}
    _hook(
        record,
        "SessionStart",
        {**base, "hook_event_name": "SessionStart", "source": "startup"},
        env,
        home,
    )
    found: list[int] = []
    headers = {"Authorization": f"Bearer {target.token}", "X-Factbank-Agent": f"load-{i}"}
    with httpx.Client(headers=headers, timeout=30, trust_env=False) as http:
        n = 0
        while time.monotonic() < until and n < MAX_CALLS_PER_AGENT:
            n += 1
            query = query_for(i, n)
            _hook(
                record,
                "UserPromptSubmit",
                {**base, "hook_event_name": "UserPromptSubmit", "prompt": query},
                env,
                home,
            )
            r = _timed(
                record,
                "POST /v1/search",
                lambda q=query: http.post(f"{target.recall}/v1/search", json={"query": q}),
            )
            if r is not None and r.status_code == 200:
                found += [hit["fact"]["id"] for hit in r.json().get("results", [])[:1]]
            if rng.random() < 0.3:
                r = _timed(
                    record,
                    "POST /v1/facts",
                    lambda n=n: http.post(f"{target.ingest}/v1/facts", json=fact_for(i, n)),
                )
                if r is not None and r.status_code == 201:
                    with record.lock:
                        record.acked.add(r.json()["fact"]["id"])
            if found and rng.random() < 0.1:
                fid = rng.choice(found)
                _timed(
                    record,
                    "POST /v1/facts/{id}/confirm",
                    lambda fid=fid: http.post(
                        f"{target.ingest}/v1/facts/{fid}/confirm", json={"reason": "load drill"}
                    ),
                )
            time.sleep(think * rng.uniform(0.5, 1.5))


def seed(target: Target, facts: int) -> set[int]:
    lines = "\n".join(json.dumps(fact_for(100 + k % 20, k)) for k in range(facts))
    with httpx.Client(
        headers={"Authorization": f"Bearer {target.token}"}, timeout=600, trust_env=False
    ) as http:
        r = http.post(
            f"{target.ingest}/v1/facts/import",
            content=lines,
            headers={"content-type": "application/x-ndjson"},
        )
        r.raise_for_status()
        return {o["fact"]["id"] for o in r.json()["results"]}


def stored_ids(target: Target) -> set[int]:
    ids: set[int] = set()
    after = 0
    with httpx.Client(
        headers={"Authorization": f"Bearer {target.token}"}, timeout=60, trust_env=False
    ) as http:
        for _ in range(10_000):
            r = http.get(f"{target.recall}/v1/facts", params={"after": after, "limit": 1000})
            r.raise_for_status()
            page = r.json()
            ids |= {f["id"] for f in page["facts"]}
            if page.get("next_cursor") is None:
                return ids
            after = page["next_cursor"]
    return ids


def run(
    target: Target, agents: int, duration: float, think: float = 0.2, seed_facts: int = 200
) -> dict:
    """Drive one target; returns the figures (and prints nothing)."""
    seeded = seed(target, seed_facts) if seed_facts else set()
    record = Record()
    peak_connections = 0
    home = Path(tempfile.mkdtemp(prefix="fb-load-"))
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_connections
        while not stop.is_set() and target.connections is not None:
            try:
                peak_connections = max(peak_connections, target.connections())
            except Exception:  # a figure, not a failure
                pass
            stop.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    until = time.monotonic() + duration
    start = time.monotonic()
    threads = [
        threading.Thread(target=agent_loop, args=(i, target, record, until, think, home))
        for i in range(agents)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration + 120)
    elapsed = time.monotonic() - start
    stop.set()
    sampler.join(5)
    shutil.rmtree(home, ignore_errors=True)
    stored = stored_ids(target)
    with httpx.Client(
        headers={"Authorization": f"Bearer {target.token}"}, timeout=30, trust_env=False
    ) as http:
        stats = http.get(f"{target.recall}/v1/stats").json()
    routes = {}
    for route, lat in sorted(record.lat.items()):
        routes[route] = {
            "n": len(lat),
            "rps": len(lat) / elapsed,
            "p50": percentile(lat, 0.5) * 1000,
            "p95": percentile(lat, 0.95) * 1000,
            "p99": percentile(lat, 0.99) * 1000,
        }
    calls = sum(r["n"] for r in routes.values())
    return {
        "target": target.name,
        "agents": agents,
        "seconds": elapsed,
        "calls": calls,
        "throughput": calls / elapsed,
        "routes": routes,
        "errors": dict(record.errors),
        "errors_5xx": sum(v for k, v in record.errors.items() if re.search(r" 5\d\d$", k)),
        "writes_acked": len(record.acked),
        "lost_writes": len((record.acked | seeded) - stored),
        "cache": stats.get("cache"),
        "peak_pg_connections": peak_connections,
    }


def print_table(result: dict, out=sys.stdout) -> None:
    print(
        f"\n== {result['target']}: {result['agents']} agents, {result['seconds']:.0f} s, "
        f"{result['calls']} calls, {result['throughput']:.1f} calls/s ==",
        file=out,
    )
    print(f"{'route':32} {'n':>6} {'rps':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}", file=out)
    for route, r in result["routes"].items():
        print(
            f"{route:32} {r['n']:>6} {r['rps']:>7.1f} {r['p50']:>8.1f} {r['p95']:>8.1f} "
            f"{r['p99']:>8.1f}",
            file=out,
        )
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(result["errors"].items())) or "none"
    print(f"errors: {errors} (5xx: {result['errors_5xx']})", file=out)
    print(f"writes acked {result['writes_acked']}, lost {result['lost_writes']}", file=out)
    cache = result.get("cache") or {}
    rates = ", ".join(f"{k} {v.get('hit_rate')}" for k, v in cache.items() if isinstance(v, dict))
    print(
        f"cache ({cache.get('backend')}): hit rates {rates}; peak Postgres connections "
        f"{result['peak_pg_connections']}",
        file=out,
    )


def print_ratio(embedded: dict, compose: dict, out=sys.stdout) -> None:
    print("\n== compose / embedded ==", file=out)
    print(
        f"throughput: {compose['throughput']:.1f} / {embedded['throughput']:.1f} calls/s = "
        f"x{compose['throughput'] / embedded['throughput']:.2f}",
        file=out,
    )
    print(f"{'route':32} {'p50 ratio':>10} {'p95 ratio':>10}", file=out)
    for route, c in compose["routes"].items():
        e = embedded["routes"].get(route)
        if e:
            print(f"{route:32} {c['p50'] / e['p50']:>10.2f} {c['p95'] / e['p95']:>10.2f}", file=out)


# --- targets ---------------------------------------------------------------------------------


def _pg_connections_from(pgdata: Path) -> Callable[[], int]:
    """Connections to the embedded cluster, through its socket (postmaster.pid names it)."""
    import asyncio

    import asyncpg

    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    port, socket_dir = lines[3].strip(), lines[4].strip()

    def count() -> int:
        async def go() -> int:
            conn = await asyncpg.connect(
                host=socket_dir, port=int(port), user="postgres", database="postgres"
            )
            try:
                return await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = 'factbank'"
                )
            finally:
                await conn.close()

        return asyncio.run(go())

    return count


@contextmanager
def embedded_target(host: str = "127.0.0.76") -> Iterator[Target]:
    home = Path(tempfile.mkdtemp(prefix="fb-load-home-"))
    home.chmod(0o755)
    env = {**os.environ, "FACTBANK_HOME": str(home), "FACTBANK_HOST": host}
    for key in ("DATABASE_URL", "DATABASE_URL_READ", "REDIS_URL"):
        env.pop(key, None)
    log = (home / "up.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "factbank_client.cli.main", "up"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        token = None
        while time.monotonic() < deadline:
            text = (home / "up.log").read_text()
            token = token or next(iter(re.findall(r"\b(fb_[A-Za-z0-9_-]{20,})", text)), None)
            if token and "factbank up: ingest" in text:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"factbank up exited:\n{text[-3000:]}")
            time.sleep(0.5)
        else:
            raise RuntimeError("factbank up did not come up in 180 s")
        ingest = re.search(r"ingest (http://\S+?),", text).group(1)
        recall = re.search(r"recall (http://\S+?)[ ,]", text).group(1)
        try:
            connections = _pg_connections_from(home / "pgdata")
        except (OSError, IndexError):
            connections = None
        yield Target("embedded (factbank up)", ingest, recall, token, connections)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def compose_target(bind: str = "127.0.0.77") -> Iterator[Target]:
    sys.path.insert(0, str(ROOT))
    from tests.compose import engine as engine_mod

    with engine_mod.session_lock():
        yield from _compose_target(engine_mod, bind)


def _compose_target(engine_mod, bind: str) -> Iterator[Target]:
    from tests.compose.stack import Stack, use_public_images, write_env_file

    eng = engine_mod.start()
    work = Path(tempfile.mkdtemp(prefix="fb-load-compose-"))
    stack = Stack(eng, "fbload", bind, write_env_file(work / "factbank.env"))
    try:
        if not use_public_images():
            subprocess.run(
                [str(ROOT / "ops" / "local-images")],
                env={**eng.env, "DOCKER": eng.client},
                check=True,
            )
        stack.compose("down", "--volumes", "--timeout", "5", check=False)
        stack.compose("build", "migrate", timeout=1800)
        stack.up()
        token = stack.issue_token("load", "agent", "read,write")

        def connections() -> int:
            return int(
                stack.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = 'factbank'")
            )

        yield Target("compose", stack.ingest_url, stack.recall_url, token, connections)
    finally:
        stack.compose("down", "--volumes", "--timeout", "20", check=False)
        eng.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m factbank_evals.load_drill", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--target", choices=["both", "embedded", "compose"], default="both")
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60, help="seconds per target")
    parser.add_argument("--think", type=float, default=0.2, help="seconds between actions")
    parser.add_argument("--seed-facts", type=int, default=200)
    parser.add_argument("--url-ingest")
    parser.add_argument("--url-recall")
    parser.add_argument("--token")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    if not 1 <= args.agents <= 200 or not 1 <= args.duration <= 900:
        parser.error("keep it bounded: 1..200 agents, 1..900 s")
    results = []
    if args.url_ingest:
        target = Target("given", args.url_ingest, args.url_recall, args.token)
        results.append(run(target, args.agents, args.duration, args.think, args.seed_facts))
    else:
        makers = {"embedded": embedded_target, "compose": compose_target}
        names = ["embedded", "compose"] if args.target == "both" else [args.target]
        for name in names:
            with makers[name]() as target:
                results.append(run(target, args.agents, args.duration, args.think, args.seed_facts))
            print_table(results[-1])
    if args.url_ingest:
        print_table(results[-1])
    if len(results) == 2:
        print_ratio(results[0], results[1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    bad = any(r["errors_5xx"] or r["lost_writes"] for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
