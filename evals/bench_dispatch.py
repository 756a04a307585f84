"""What dispatch costs: starting a run, supervising it, and reading runs back.

    python -m factbank_evals.bench_dispatch [--n 20] [--json]

A stand-in harness (tests/fixtures/dispatch/replay.py) replays the stream the real Claude Code
2.1.197 printed (11 lines: two commands, an edit, an answer), so the figures are dispatch's own,
not a model's. Rows:

* `start()` returns: what the dashboard's POST (or `factbank dispatch`) waits for;
* first event on disk: from `start()` to the supervisor's first event in events.jsonl
  (the supervisor's interpreter start and imports);
* whole run supervised: from `start()` to the record saying `done` (harness start, parsing,
  the end written);
* `list()` of 500 runs (the store's bound) and `events(after=...)` at the end of a
  10,000-event log (the bound): what each poll of a live view costs at the limits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from factbank_client.dispatch import Run, RunStore, start
from factbank_client.dispatch import store as store_mod
from factbank_evals.metrics import percentile

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "dispatch"


def _ms(values: list[float]) -> dict:
    return {"n": len(values), "p50": percentile(values, 0.5) * 1000,
            "p95": percentile(values, 0.95) * 1000, "max": max(values) * 1000}


def bench(n: int) -> dict[str, dict]:
    root = Path(tempfile.mkdtemp(prefix="fb-bench-dispatch-"))
    try:
        script = root / "fake-claude"
        script.write_text(f"#!/bin/sh\nexec {sys.executable} {FIXTURES / 'replay.py'} "
                          "\"$@\"\n")
        script.chmod(0o755)
        repo = root / "repo"
        repo.mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "REPLAY_FILE": str(FIXTURES / "claude.jsonl")}
        os.environ["FACTBANK_CONFIG"] = str(root / "none.toml")  # no timeline sends
        store = RunStore(root / "runs")
        starts, first, whole = [], [], []
        for _ in range(n):
            t0 = time.perf_counter()
            run = start(store, "claude", "bench", repo, env=env, binaries={"claude": str(script)})
            starts.append(time.perf_counter() - t0)
            path = store.events_path(run.id)
            while path.stat().st_size == 0:
                time.sleep(0.002)
            first.append(time.perf_counter() - t0)
            while not (r := store.get(run.id)) or not r.finished:
                time.sleep(0.005)
            whole.append(time.perf_counter() - t0)
        # A long run: a Codex stream of 5,000 commands, each logged with its output.
        long = root / "long.jsonl"
        item = {"type": "item.completed", "item": {
            "id": "i", "type": "command_execution", "command": "/bin/bash -lc 'pytest -q'",
            "exit_code": 1, "status": "failed", "aggregated_output": "F" * 400}}
        long.write_text(json.dumps({"type": "thread.started", "thread_id": "t"}) + "\n"
                        + (json.dumps(item) + "\n") * 5000)
        t0 = time.perf_counter()
        run = start(store, "codex", "bench", repo, env={**env, "REPLAY_FILE": str(long)},
                    binaries={"codex": str(script)})
        while not (r := store.get(run.id)) or not r.finished:
            time.sleep(0.01)
        longrun = [time.perf_counter() - t0]
        # The bounds: 500 records, a 10,000-event log.
        for i in range(store_mod.MAX_RUNS - n):
            store.create(Run(id=store_mod.new_id() + f"{i:04d}", agent="codex", task="t",
                             repo="/", status="done", started_at=store_mod.now_iso()))
        lists, pages = [], []
        for _ in range(10):
            t0 = time.perf_counter()
            store.list(limit=store_mod.MAX_RUNS)
            lists.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            store.list()
            pages.append(time.perf_counter() - t0)
        big = store.list(limit=1)[0].id
        for _ in range(10):
            store.append_events(big, [{"kind": "command", "command": "pytest -q",
                                       "exit_code": 0, "text": "x" * 200}] * 1000)
        reads = []
        for _ in range(10):
            t0 = time.perf_counter()
            store.events(big, after=store_mod.MAX_EVENTS - 10)
            reads.append(time.perf_counter() - t0)
        return {"start() returns": _ms(starts), "first event on disk": _ms(first),
                "whole run supervised (11-line stream)": _ms(whole),
                "whole run supervised (5,000 commands)": _ms(longrun),
                f"list() of {store_mod.MAX_RUNS} runs": _ms(lists),
                f"list() (the default {store_mod.LIST_LIMIT}) of {store_mod.MAX_RUNS}": _ms(pages),
                f"events(after=) at a {store_mod.MAX_EVENTS}-event log": _ms(reads)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_dispatch", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20, help="runs to start (default 20)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = bench(args.n)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print("| what | n | p50 ms | p95 ms | max ms |\n|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['n']} | {r['p50']:.1f} | {r['p95']:.1f} | {r['max']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
