"""Redaction speed: p50/p95 of ``redact_text`` per string, by kind of string, and start-up cost.

    python -m factbank_evals.redaction_bench [--runs N] [--json]

``redact_text`` runs on every stored or echoed string (a fact's fields, tags, reasons, audit
details), in a worker thread; this prints how long one call takes for the strings a write
carries: short ones (a tag, a reason), a typical ~300-character fact, a 2 KB and a 10 KB fact,
and the texts of both fixture corpora (``evals/sets/secrets``, mixed secrets and look-alikes).
Each string is timed ``--runs`` times after a warm-up; p50/p95 are over all those samples.

Start-up is measured in fresh interpreters (``python -c``): the import of the redaction module,
``warm_up()`` (which compiles the rule sets), and the first ``redact_text`` after it. A
compiled-rules cache on disk (Kingfisher's) makes the second start faster than the first on a
machine; both are reported.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from factbank.redact.redaction import warm_up
from factbank_evals.metrics import percentile
from factbank_evals.redaction_recall import TYPICAL_FACT, redaction_ms

SETS = Path(__file__).resolve().parent / "sets" / "secrets"

_SHORT = [
    "ci",
    "moved to the new runbook",
    "superseded: the pool size is 20 now",
    "backend",
    "agent-7",
    "部署前先跑迁移",
]
_PARAGRAPH = (
    "Deploys go through the release pipeline: `make release` builds the wheel, tags it "
    "v2.14.3 and pushes to registry.internal:5000/factbank. The staging cluster (k8s 1.29, "
    "namespace fb-staging, pod api-7d9f8b6c5d-x2x4z) pulls it within 5 minutes; see "
    "https://wiki.example.org/ops/release and commit 9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d. "
)


def _strings() -> dict[str, list[str]]:
    corpus = []
    for name in ("corpus.jsonl", "heldout2.jsonl"):
        path = SETS / name
        if path.exists():
            with path.open(encoding="utf-8") as fh:
                corpus += [json.loads(line)["text"] for line in fh if line.strip()]
    return {
        "short (tag, reason)": _SHORT,
        f"typical fact ({len(TYPICAL_FACT)} chars)": [TYPICAL_FACT],
        "2 KB fact": [(_PARAGRAPH * 6)[:2048]],
        "10 KB fact": [(_PARAGRAPH * 30)[:10240]],
        f"fixture corpora ({len(corpus)} texts)": corpus,
    }


def _time(strings: list[str], runs: int) -> dict:
    samples = redaction_ms(strings, runs)
    return {
        "strings": len(strings),
        "samples": len(samples),
        "p50_ms": round(percentile(samples, 0.5), 3),
        "p95_ms": round(percentile(samples, 0.95), 3),
    }


_STARTUP = """
import time
t0 = time.perf_counter()
from factbank.redact.redaction import redact_text, warm_up
t1 = time.perf_counter()
warm_up()
t2 = time.perf_counter()
redact_text("DATABASE_URL=postgres://app:hunter2x@db:5432/facts")
t3 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f}")
"""


def startup(starts: int = 2) -> list[dict]:
    out = []
    for _ in range(starts):
        res = subprocess.run(
            [sys.executable, "-c", _STARTUP], check=True, capture_output=True, text=True
        )
        imp, warm, first = (float(x) for x in res.stdout.split())
        out.append({"import_s": imp, "warm_up_s": warm, "first_call_s": first})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="timed calls per string")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    starts = startup()
    warm_up()
    rows = {name: _time(strings, args.runs) for name, strings in _strings().items()}
    if args.json:
        json.dump({"per_string": rows, "startup": starts}, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'strings':34} {'n':>5} {'samples':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for name, r in rows.items():
        print(f"{name:34} {r['strings']:>5} {r['samples']:>8} {r['p50_ms']:>8} {r['p95_ms']:>8}")
    print()
    print(f"{'start-up (fresh process)':34} {'import s':>8} {'warm_up s':>9} {'1st call s':>10}")
    for i, s in enumerate(starts, 1):
        print(
            f"{'start ' + str(i):34} {s['import_s']:>8.3f} {s['warm_up_s']:>9.3f}"
            f" {s['first_call_s']:>10.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
