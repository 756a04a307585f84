"""Redaction recall and look-alike keep rate on corpora built from public scanner fixtures.

    python -m factbank_evals.redaction_recall [--json] [--families] [--corpus PATH ...]

Every row of ``evals/sets/secrets/corpus.jsonl`` (gitleaks and detect-secrets fixtures) and of
``evals/sets/secrets/heldout2.jsonl`` (secretlint, whispers, ripsecrets and trivy fixtures)
goes through ``factbank.redact.redaction.redact_text``, the same call the write gate makes for
every field. A **secret** row is
*caught* when the credential no longer appears in the output (when the fixture does not say
which part is the credential, when the text changed at all) and a finding was reported. A
**look-alike** row is *kept* when the output is byte-for-byte the input. A **random** row (a
scanner's negative that still holds a random, credential-shaped token) is reported the same
way but has no target: redacting unlabelled random strings is factbank's policy. Shares are printed
per family (``--families``), per source, and overall, for each split: ``dev`` (what redaction
was tuned on), ``heldout`` (families held out of the first corpus; read while tuning in issue
12 item 9, so no longer held out) and ``heldout2`` (the second corpus, built before that
tuning and not read until it was done; ``evals/sets/secrets/README.md``). The timing line is
redaction of a typical ~300-character fact, p50 and p99 over many runs (the per-string bench
is ``python -m factbank_evals.redaction_bench``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from factbank.redact.redaction import redact_text
from factbank_evals.metrics import percentile

SETS = Path(__file__).resolve().parent / "sets" / "secrets"
CORPUS = SETS / "corpus.jsonl"
HELDOUT2 = SETS / "heldout2.jsonl"
CORPORA = (CORPUS, HELDOUT2)
SPLITS = ("dev", "heldout", "heldout2", "all")
TARGET_CAUGHT = 0.95
TARGET_KEPT = 0.90

TYPICAL_FACT = (
    "The ingest service on staging reads DATABASE_URL=postgres://app@db.internal:5432/facts "
    "and caches embeddings in Redis (redis://cache:6379/2). Commit 3f2a9c1 moved the pool size "
    "to 20 after the 2024-05-01 outage; see services/ingest/app.py:142 and the runbook at "
    "https://wiki.example.org/ops/ingest. 部署前先跑迁移。"
)


def load(*paths: Path) -> list[dict]:
    """The rows of the given corpora (both by default), each keeping its own split."""
    rows = []
    for path in paths or CORPORA:
        with path.open(encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    return rows


def judge(row: dict) -> bool:
    """True when the row is handled right: a secret caught, a look-alike kept."""
    out, findings = redact_text(row["text"])
    if row["expected"] in ("lookalike", "random"):
        return out == row["text"] and not findings
    value = row.get("value")
    if value:
        return bool(findings) and value not in out
    return bool(findings) and out != row["text"]


class _Tally:
    def __init__(self) -> None:
        self.secrets = 0
        self.caught = 0
        self.lookalikes = 0
        self.kept = 0
        self.randoms = 0
        self.randoms_kept = 0

    def add(self, row: dict, ok: bool) -> None:
        if row["expected"] == "secret":
            self.secrets += 1
            self.caught += ok
        elif row["expected"] == "random":
            self.randoms += 1
            self.randoms_kept += ok
        else:
            self.lookalikes += 1
            self.kept += ok

    def as_dict(self) -> dict:
        return {
            "secrets": self.secrets,
            "caught": self.caught,
            "caught_share": round(self.caught / self.secrets, 4) if self.secrets else None,
            "lookalikes": self.lookalikes,
            "kept": self.kept,
            "kept_share": round(self.kept / self.lookalikes, 4) if self.lookalikes else None,
            "random": self.randoms,
            "random_kept_share": (
                round(self.randoms_kept / self.randoms, 4) if self.randoms else None
            ),
        }


def evaluate(rows: Iterable[dict]) -> dict:
    overall: dict[str, _Tally] = defaultdict(_Tally)
    by_source: dict[tuple[str, str], _Tally] = defaultdict(_Tally)
    by_family: dict[tuple[str, str], _Tally] = defaultdict(_Tally)
    misses: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        ok = judge(row)
        split = row["split"]
        for key in (split, "all"):
            overall[key].add(row, ok)
        by_source[(row["family"].split(":")[0], split)].add(row, ok)
        by_family[(row["family"], split)].add(row, ok)
        if not ok:
            misses[f"wrong_{row['expected']}"].append(f"{split}:{row['id']}")
    return {
        "overall": {k: v.as_dict() for k, v in sorted(overall.items())},
        "by_source": {f"{s} ({sp})": v.as_dict() for (s, sp), v in sorted(by_source.items())},
        "by_family": {f: {"split": sp, **v.as_dict()} for (f, sp), v in sorted(by_family.items())},
        "misses": dict(misses),
        "timing": timing(),
        "targets": {"caught": TARGET_CAUGHT, "kept": TARGET_KEPT},
    }


def redaction_ms(strings: Iterable[str], runs: int) -> list[float]:
    """Milliseconds of `runs` redactions of each string, each string redacted once first (the
    scanner compiles its rules once per process, and a string's first pass warms its path)."""
    samples = []
    for s in strings:
        redact_text(s)
        for _ in range(runs):
            start = time.perf_counter()
            redact_text(s)
            samples.append((time.perf_counter() - start) * 1000)
    return samples


def timing(runs: int = 300) -> dict:
    samples = redaction_ms([TYPICAL_FACT], runs)
    return {
        "fact_chars": len(TYPICAL_FACT),
        "p50_ms": round(percentile(samples, 0.5), 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
    }


def _share(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


def render(result: dict, families: bool = False) -> str:
    lines = [
        f"{'':34} {'secrets':>7} {'caught':>6}  {'look-alikes':>11} {'kept':>6}"
        f"  {'random-shaped':>13} {'kept':>6}",
    ]

    def row(label: str, t: dict) -> str:
        return (
            f"{label:34} {t['secrets']:>7} {_share(t['caught_share']):>6}  "
            f"{t['lookalikes']:>11} {_share(t['kept_share']):>6}"
            f"  {t['random']:>13} {_share(t['random_kept_share']):>6}"
        )

    if families:
        for name, t in result["by_family"].items():
            lines.append(row(f"{name} ({t['split']})", t))
        lines.append("")
    for name, t in result["by_source"].items():
        lines.append(row(name, t))
    lines.append("")
    for split in SPLITS:
        if split in result["overall"]:
            lines.append(row(f"overall {split}", result["overall"][split]))
    tm = result["timing"]
    lines.append("")
    lines.append(
        "random-shaped: scanner negatives that still hold a random credential-shaped token "
        "(no target;\nfactbank redacts unlabelled random strings of 20+ characters on purpose)."
    )
    lines.append(
        f"targets: caught >= {TARGET_CAUGHT}, kept >= {TARGET_KEPT}.  redaction of a "
        f"{tm['fact_chars']}-char fact: p50 {tm['p50_ms']} ms, p99 {tm['p99_ms']} ms"
    )
    return "\n".join(lines)


def client_agreement(rows: list[dict]) -> dict:
    """The client's redaction against the server's, on the same rows: the share
    of texts where `factbank_client.redact.redact` (the server's, in-process) gives the
    server's text byte for byte, and for the light client's fallback the share of the secrets
    the server removes that it removes too, and of the look-alikes it keeps."""
    from factbank_client import redact as client

    def caught(row: dict, out: str) -> bool:
        return row["value"] not in out if row.get("value") else out != row["text"]

    equal = both = server_caught = kept = looks = 0
    for row in rows:
        server = redact_text(row["text"], "dispatch")[0]
        equal += client.redact(row["text"]) == server
        fallback = client.fallback(row["text"])
        if row["expected"] == "secret" and caught(row, server):
            server_caught += 1
            both += caught(row, fallback)
        elif row["expected"] == "lookalike":
            looks += 1
            kept += fallback == row["text"]
    return {"rows": len(rows), "client_equals_server": equal / len(rows),
            "fallback_catches_of_server": both / server_caught if server_caught else None,
            "fallback_lookalikes_kept": kept / looks if looks else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the full result as JSON")
    ap.add_argument("--families", action="store_true", help="one line per family")
    ap.add_argument("--corpus", type=Path, action="append", help="a corpus (default: both)")
    ap.add_argument("--client", action="store_true",
                    help="compare the client's redaction (and its fallback) with the server's")
    args = ap.parse_args(argv)
    if args.client:
        print(json.dumps(client_agreement(load(*(args.corpus or ()))), indent=2))
        return 0
    result = evaluate(load(*(args.corpus or ())))
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print(render(result, families=args.families))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
