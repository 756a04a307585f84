"""The code symbol graph, measured: build time and peak memory on real repositories, the update
after a one-file commit, tool latency, and find_callers' precision and recall against a
hand-checked list.

    nice -n 10 python -m factbank_evals.bench_code [--django VERSION] [--updates 5] [--json]
                                                   [--show-misses]

Corpora (each made a git repository in a temporary directory; nothing is kept):

* this project at the commit the hand-checked list was made on (`evals/sets/code-callers/
  callers.json`, `git archive` of that commit: the list's line numbers hold there);
* Django from PyPI (`pip download django`, the wheel's source: ~160k lines of Python and
  ~27k of JavaScript, vendored jQuery and select2 included), a large public package.

Each build runs in a fresh process that reports its own wall time and peak RSS
(`ru_maxrss`), so one corpus's memory does not hide another's. The update is timed twice: in a
warm process (the MCP server's case: it keeps running) and as a new `factbank code index`
process (the CLI's case, interpreter start included), after committing a one-function change
to one file. Tool latency is the in-process time of each tool over the list's symbols,
`update()` (the git check every tool call makes) included. Precision and recall count call
sites (path, line): a site is predicted when find_callers ranks it at or above the threshold.

Timings are taken on a shared 2-core machine: they are inflated by whatever else runs; the
ratios and the update's size-independence are what to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SET = Path(__file__).resolve().parent / "sets" / "code-callers" / "callers.json"
THRESHOLDS = (0.9, 0.5, 0.01)

_BUILD = """
import json, resource, sys, time
from pathlib import Path
from factbank_client.code.graph import CodeIndex
t, cpu = time.perf_counter(), time.process_time()
with CodeIndex(Path(sys.argv[1]), Path(sys.argv[2])) as index:
    stats = index.update()
    counts = index.counts()
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": time.process_time() - cpu,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "parsed": stats.parsed, "files": counts["files"], "lines": counts["lines"],
                  "symbols": counts["symbols"], "uses": counts["uses"],
                  "db_mb": Path(sys.argv[2]).stat().st_size / 2**20}))
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=bench@example.com", "-c",
                           "user.name=bench", *args], check=True, capture_output=True,
                          text=True).stdout


def make_repo(path: Path) -> Path:
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "corpus")
    return path


def project_corpus(work: Path, commit: str) -> Path:
    out = work / "factbank"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return make_repo(out)


def django_corpus(work: Path, version: str | None) -> Path:
    cache = Path(tempfile.gettempdir()) / "factbank-bench-code"
    cache.mkdir(exist_ok=True)
    spec = f"django=={version}" if version else "django"
    wheels = sorted(cache.glob("django-*.whl"))
    if version:
        wheels = [w for w in wheels if f"-{version}-" in w.name]
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                        str(cache), spec], check=True, capture_output=True)
        wheels = sorted(cache.glob("django-*.whl"))
    out = work / "django"
    out.mkdir()
    with zipfile.ZipFile(wheels[-1]) as zf:
        zf.extractall(out)
    return make_repo(out)


def build(repo: Path, db: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _BUILD, str(repo), str(db)], check=True,
                          capture_output=True, text=True)
    return json.loads(proc.stdout)


def one_file_updates(repo: Path, db: Path, n: int) -> dict:
    """Commit a one-function change to n different files; time the update each time."""
    from factbank_client.code.graph import CodeIndex

    files = sorted(p for p in git(repo, "ls-files", "*.py").split("\n") if p)
    picks = [files[(i + 1) * len(files) // (n + 1)] for i in range(n)]
    warm, warm_cpu, cold, parsed = [], [], [], []
    env = {**os.environ, "XDG_CACHE_HOME": str(db.parent / "xdg")}
    with CodeIndex(repo, db) as index:
        index.update()
        for i, path in enumerate(picks):
            with open(repo / path, "a", encoding="utf-8") as fh:
                fh.write(f"\n\ndef bench_added_{i}(x):\n    return x + {i}\n")
            git(repo, "commit", "-qam", f"one file {i}")
            t, cpu = time.perf_counter(), time.process_time()
            stats = index.update()
            warm.append(time.perf_counter() - t)
            warm_cpu.append(time.process_time() - cpu)
            parsed.append(stats.parsed)
        # The CLI's case: a new process (imports, open, git check, parse one file).
        for i, path in enumerate(picks):
            with open(repo / path, "a", encoding="utf-8") as fh:
                fh.write(f"\n\ndef bench_cli_{i}(x):\n    return x - {i}\n")
            git(repo, "commit", "-qam", f"cli file {i}")
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "factbank_client.cli.main", "code", "index",
                            "--json"], cwd=repo, check=True, capture_output=True, env=env)
            cold.append(time.perf_counter() - t)
    return {"warm_p50": _p50(warm), "warm_max": max(warm), "warm_cpu_p50": _p50(warm_cpu),
            "cold_p50": _p50(cold), "parsed": parsed}


def _p50(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def latency_and_accuracy(repo: Path, db: Path, cases: list[dict]) -> dict:
    from factbank_client.code import answers
    from factbank_client.code.graph import CodeIndex

    with CodeIndex(repo, db) as index:
        index.update()
    times: dict[str, list[float]] = {tool: [] for tool in answers.TOOLS}
    found: dict[str, dict] = {}
    os.environ["FACTBANK_CODE_EMBED"] = "0"
    for case in cases:
        spec = case["symbol"]
        for tool in answers.TOOLS:
            arg = spec if tool != "search" else spec.rsplit("::", 1)[1].replace(".", " ")
            t = time.perf_counter()
            out = _run(tool, arg, repo, db)
            times[tool].append(time.perf_counter() - t)
            if tool == "callers":
                found[spec] = out
    return {"p50": {tool: _p50(v) for tool, v in times.items()},
            "max": {tool: max(v) for tool, v in times.items()}, "found": found}


def _run(tool: str, arg: str, repo: Path, db: Path) -> dict:
    """answers.run against an explicit index file (the bench's, not the user's cache)."""
    from factbank_client.code.graph import CodeIndex

    with CodeIndex(repo, db) as index:
        index.update()
        if tool == "callers":
            return index.callers(arg, limit=10_000)
        if tool == "refs":
            return index.references(arg, limit=10_000)
        if tool == "search":
            return index.search(arg, embed=False)
        return index.explain(arg)


def score(cases: list[dict], found: dict[str, dict], threshold: float) -> dict:
    tp = fp = fn = 0
    per: list[dict] = []
    for case in cases:
        truth = {(p, line) for p, line in case["callers"]}
        out = found[case["symbol"]]
        if not isinstance(out.get("symbol"), dict):
            predicted: set = set()
        else:
            predicted = {(s["path"], s["line"]) for s in out["callers"]
                         if s["confidence"] >= threshold}
        hit = truth & predicted
        tp += len(hit)
        fp += len(predicted - truth)
        fn += len(truth - predicted)
        per.append({"symbol": case["symbol"], "missed": sorted(truth - predicted),
                    "wrong": sorted(predicted - truth)})
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"threshold": threshold, "tp": tp, "fp": fp, "fn": fn,
            "precision": precision, "recall": recall, "per_symbol": per}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--django", default="5.2.19", help="Django version from PyPI (default "
                    "5.2.19; '' for the newest)")
    ap.add_argument("--updates", type=int, default=5, help="one-file commits to time")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show-misses", action="store_true",
                    help="list each symbol's missed and wrong call sites")
    args = ap.parse_args(argv)
    data = json.loads(SET.read_text("utf-8"))
    cases = data["symbols"]
    held = data.get("held_out", [])
    report: dict = {"set": str(SET.relative_to(ROOT)), "commit": data["commit"],
                    "symbols": len(cases), "sites": sum(len(c["callers"]) for c in cases),
                    "held_out_symbols": len(held),
                    "held_out_sites": sum(len(c["callers"]) for c in held)}
    with tempfile.TemporaryDirectory(prefix="bench-code-") as tmp:
        work = Path(tmp)
        corpora = {"factbank@" + data["commit"][:7]: project_corpus(work, data["commit"]),
                   "django " + (args.django or "newest"): django_corpus(work, args.django)}
        builds = {}
        for name, repo in corpora.items():
            builds[name] = build(repo, work / f"{repo.name}.sqlite")
        report["builds"] = builds
        # Both together: the >100k-line case in one repository.
        both = work / "both"
        shutil.copytree(corpora[next(iter(corpora))], both, ignore=shutil.ignore_patterns(".git"))
        shutil.copytree(list(corpora.values())[1], both / "third_party_django",
                        ignore=shutil.ignore_patterns(".git"))
        make_repo(both)
        report["builds"]["both in one repository"] = build(both, work / "both.sqlite")
        report["update"] = one_file_updates(both, work / "both.sqlite", args.updates)
        project = next(iter(corpora.values()))
        measured = latency_and_accuracy(project, work / f"{project.name}.sqlite", cases + held)
    report["latency_p50"] = measured["p50"]
    report["latency_max"] = measured["max"]
    report["accuracy"] = [score(cases, measured["found"], t) for t in THRESHOLDS]
    report["held_out_accuracy"] = [score(held, measured["found"], t) for t in THRESHOLDS]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"## Code graph ({report['symbols'] + report['held_out_symbols']} hand-checked "
          f"symbols, {report['sites'] + report['held_out_sites']} call sites, {report['set']} "
          f"at {report['commit'][:7]})\n")
    print("| corpus | files | lines | symbols | uses | build s (wall) | build s (CPU) | "
          "peak RSS MB | index MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, b in report["builds"].items():
        print(f"| {name} | {b['files']} | {b['lines']:,} | {b['symbols']:,} | {b['uses']:,} | "
              f"{b['seconds']:.1f} | {b['cpu']:.1f} | {b['maxrss_mb']:.0f} | "
              f"{b['db_mb']:.0f} |")
    print(f"\n(machine load average while it ran: {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores)")
    u = report["update"]
    print(f"\nUpdate after a one-file commit (both in one repository, {len(u['parsed'])} "
          f"commits, files parsed each time: {sorted(set(u['parsed']))}): warm process p50 "
          f"{u['warm_p50'] * 1000:.0f} ms (max {u['warm_max'] * 1000:.0f} ms; CPU p50 "
          f"{u['warm_cpu_p50'] * 1000:.0f} ms); new "
          f"`factbank code index` process p50 {u['cold_p50'] * 1000:.0f} ms.\n")
    print("| tool | p50 ms | max ms |")
    print("|---|---:|---:|")
    names = {"callers": "find_callers", "refs": "find_references", "explain": "explain_symbol",
             "search": "search_code"}
    for tool, p50 in report["latency_p50"].items():
        print(f"| {names[tool]} | {p50 * 1000:.0f} | {report['latency_max'][tool] * 1000:.0f} |")
    print("\n| find_callers | at confidence >= | precision | recall | right | wrong | "
          "missed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, rows in ((f"developed on ({report['symbols']} symbols, {report['sites']} "
                         "sites)", report["accuracy"]),
                        (f"held out ({report['held_out_symbols']} symbols, "
                         f"{report['held_out_sites']} sites)", report["held_out_accuracy"])):
        for a in rows:
            print(f"| {label} | {a['threshold']:.2f} | {a['precision']:.3f} | "
                  f"{a['recall']:.3f} | {a['tp']} | {a['fp']} | {a['fn']} |")
    if args.show_misses:
        for rows in (report["accuracy"], report["held_out_accuracy"]):
            a = rows[1]
            print(f"\nAt {a['threshold']}:")
            for p in a["per_symbol"]:
                if p["missed"] or p["wrong"]:
                    print(f"- {p['symbol']}: missed {p['missed']} wrong {p['wrong']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
