"""The pull-request check on this repository's own history, as CI runs it (`.ci/run`).

    python -m factbank_evals.pr_check [--commits 20] [--markdown FILE] [--json]

The change: BASE..HEAD, where BASE is `--base` or HEAD~N (N = `--commits`, fewer when the
history is shorter). A real stack (factbank_evals.stack: embedded Postgres, both services on
loopback) gets a bank filled with facts about this repository as it stood at BASE: for every
text file the change touches (and as many it does not), lines quoted verbatim with the
fingerprint `factbank add` records, under this repository's project key. Then the real CLI
runs as a team's CI would run it, `factbank verify --diff BASE..HEAD --json`, in a subprocess
configured by environment only; the pull-request comment is rendered from that report by the
function `--markdown` prints with (render.verify_diff_markdown).

The truth is computed here, from git, without the code under test: a fact goes stale when its
exact line (stripped) is no longer in its file after the change (its file followed through
the change's renames), moves when that line is at another line number or in the renamed file,
and is unaffected otherwise. Quoted lines are unique in their file at BASE, so the truth is
unambiguous. The check fails (exit 1) unless every fact's reported effect is the truth's, the
exit code is the documented one (1 when a fact would go stale, else 0) and the Markdown
names every stale fact with its command; exit 2 when there is no history to check
(say, a shallow clone), saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from factbank_client import render
from factbank_client.project import project_key
from factbank_client.redact import redact
from factbank_client.staleness import fingerprint
from factbank_client.staleness.verify import TreeRepo, change_of
from factbank_evals.stack import running_stack

ROOT = Path(__file__).resolve().parents[1]
PER_FILE = 3  # quoted lines per file
MAX_FILES = 10  # touched files quoted (and as many untouched ones)
MAX_BYTES = 200_000


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def pick_lines(data: bytes) -> list[tuple[int, str]]:
    """PER_FILE lines spread over the file: unique in it, 12-160 characters stripped, and
    left as they are by redaction (a redacted quote is no longer the file's text)."""
    if b"\0" in data[:8192] or len(data) > MAX_BYTES:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    stripped = [ln.strip() for ln in lines]
    counts: dict[str, int] = {}
    for s in stripped:
        counts[s] = counts.get(s, 0) + 1
    good = [(i + 1, s) for i, s in enumerate(stripped)
            if 12 <= len(s) <= 160 and counts[s] == 1 and redact(s) == s]
    if len(good) <= PER_FILE:
        return good
    step = len(good) / PER_FILE
    return [good[int(k * step)] for k in range(PER_FILE)]


def spread(items: list[str], n: int) -> list[str]:
    """n items evenly spaced over `items` (all of them when there are no more than n)."""
    if len(items) <= n:
        return items
    return [items[int(k * len(items) / n)] for k in range(n)]


def truth(change, path: str, quote: str, line: int) -> str:
    after = TreeRepo(change.root, rev=change.head)
    new_path = change.renames.get(path, path)
    try:
        lines = [ln.strip() for ln in after.read(new_path).decode("utf-8", "replace")
                 .splitlines()]
    except FileNotFoundError:
        return "stale"
    if quote not in lines:
        return "stale"
    before = TreeRepo(change.root, rev=change.base).read(path).decode("utf-8", "replace")
    old_line = [ln.strip() for ln in before.splitlines()].index(quote) + 1
    assert old_line == line
    return "moved" if new_path != path or lines.index(quote) + 1 != old_line else "unaffected"


def run(commits: int, base: str | None, markdown: Path | None) -> dict:
    started = time.monotonic()
    if base is None:
        count = int(git("rev-list", "--count", "HEAD"))
        if count < 2:
            raise SystemExit("pr_check: no history to check here (a shallow clone?): fetch it "
                             "(git fetch --unshallow) and run again")
        base = f"HEAD~{min(commits, count - 1)}"
    change = change_of(ROOT, f"{base}..HEAD")
    project = project_key(ROOT) or "factbank"
    tracked = set(git("ls-tree", "-r", "--name-only", change.base).splitlines())
    touched = spread(sorted(p for p in change.touched if p in tracked), MAX_FILES)
    untouched = spread(sorted(tracked - change.touched), len(touched) or MAX_FILES)
    before = TreeRepo(ROOT, rev=change.base)
    expected: dict[int, str] = {}
    refused = 0
    with running_stack() as stack, tempfile.TemporaryDirectory() as tmp:
        with httpx.Client(headers=stack.headers(), timeout=120) as http:
            for path in touched + untouched:
                try:
                    data = before.read(path)
                except Exception:  # a link, a submodule, something safefs refuses
                    continue
                for line, quote in pick_lines(data):
                    fp = fingerprint.build(data, path, line, line, ROOT)
                    body = {"content": f"{path} line {line} at {change.base[:10]} reads: "
                                       f"{quote}",
                            "category": "project", "project": project, "origin": "verified",
                            "source": {"kind": "file", "location": f"{path}:{line}"},
                            "quote": quote, "fingerprint": fp, "tags": ["pr-check"]}
                    r = http.post(stack.ingest + "/v1/facts", json=body)
                    if r.status_code >= 400 or r.json().get("status") != "stored":
                        refused += 1  # the write gate's call, not the check's: counted
                        continue
                    expected[int(r.json()["fact"]["id"])] = truth(change, path, quote, line)
        filled = time.monotonic()
        env = {**os.environ, "FACTBANK_URL": stack.ingest, "FACTBANK_RECALL_URL": stack.recall,
               "FACTBANK_TOKEN": stack.token,
               "FACTBANK_CONFIG": str(Path(tmp) / "none.toml"), "PYTHONWARNINGS": "ignore"}
        argv = [sys.executable, "-m", "factbank_client.cli.main", "verify", "--diff",
                f"{change.base}..{change.head}", "--project", project]
        done = subprocess.run([*argv, "--json"], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=600)
    if done.returncode not in (0, 1):
        raise SystemExit(f"pr_check: verify --diff failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-2000:]}")
    report = json.loads(done.stdout)
    # The comment `--markdown` prints, from the same report (one CLI run: CI time is small).
    md = render.verify_diff_markdown(report)
    listed = {int(r["id"]): r["effect"] for r in report["facts"]}
    got = {fid: listed.get(fid, "unaffected") for fid in expected}
    wrong = {fid: (got[fid], want) for fid, want in expected.items() if got[fid] != want}
    stale = [fid for fid, want in expected.items() if want == "stale"]
    want_exit = 1 if stale else 0
    missing_md = [fid for fid in stale if f"factbank supersede '<the claim as it is now>' "
                  f"{fid} " not in md]
    if markdown is not None:
        markdown.write_text(md, "utf-8")
    counts = {k: sum(1 for v in expected.values() if v == k)
              for k in ("stale", "moved", "unaffected")}
    return {"range": report["range"], "commits": int(git("rev-list", "--count",
                                                          f"{change.base}..{change.head}")),
            "touched_files": len(change.touched), "quoted_files": len(touched + untouched),
            "facts": len(expected), "refused": refused, "truth": counts,
            "reported": report["counts"],
            "wrong": {str(k): v for k, v in wrong.items()},
            "exit": done.returncode, "expected_exit": want_exit,
            "markdown_missing": missing_md,
            "fill_s": round(filled - started, 1),
            "verify_s": round(time.monotonic() - filled, 1),
            "ok": not wrong and done.returncode == want_exit and not missing_md}


def table(r: dict) -> str:
    t, p = r["truth"], r["reported"]
    return "\n".join([
        f"pr_check: factbank verify --diff on this repository's own history ({r['range']}, "
        f"{r['commits']} commits, {r['touched_files']} files touched)",
        "| | stale | moved | unaffected | unknown |",
        "|---|---|---|---|---|",
        f"| truth (git, by the script) | {t['stale']} | {t['moved']} | {t['unaffected']} | - |",
        f"| verify --diff | {p['stale']} | {p['moved']} | {p['unaffected']} | "
        f"{p['unknown']} |",
        "",
        f"{r['facts']} facts quoting {r['quoted_files']} files; exit {r['exit']} (expected "
        f"{r['expected_exit']}); wrong: "
        f"{len(r['wrong'])}; bank filled in {r['fill_s']} s, verified in {r['verify_s']} s: "
        + ("OK" if r["ok"] else "FAILED " + json.dumps(r["wrong"])[:2000]
           + (f" markdown misses {r['markdown_missing']}" if r["markdown_missing"] else ""))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=20,
                        help="the change is the last N commits (default 20)")
    parser.add_argument("--base", help="the change starts here instead (a revision)")
    parser.add_argument("--markdown", type=Path, metavar="FILE",
                        help="also write the pull-request comment here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        result = run(args.commits, args.base, args.markdown)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
