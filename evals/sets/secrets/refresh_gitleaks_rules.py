"""Refresh ``services/factbank/data/gitleaks-extra.toml`` from a gitleaks snapshot.

    python evals/sets/secrets/refresh_gitleaks_rules.py --gitleaks PATH

PATH is a gitleaks checkout or bare git directory (read with ``git show``). The output holds,
verbatim, every rule block of gitleaks' ``config/gitleaks.toml`` whose id Kingfisher's built-in
catalog (Betterleaks, which follows gitleaks) does not already carry, except rules that match
file paths only. At gitleaks ``b58d3f102cf3`` that is ``generic-api-key`` (the named
``key = value`` rule, with its allowlists and ~1,500 stopwords) and four keyword-context rules
(Datadog, Etsy, JFrog twice). Redaction compiles their regexes into Kingfisher's database and
applies gitleaks' entropy floor, allowlists and stopwords itself (Kingfisher reads only the
regex of a TOML rule).
"""

from __future__ import annotations

import argparse
import subprocess
import tomllib
from pathlib import Path

from kingfisher_sdk import Rules

OUT = Path(__file__).resolve().parents[3] / "services" / "factbank" / "data" / "gitleaks-extra.toml"

HEADER = """\
# Rules from gitleaks' default configuration that Kingfisher's built-in catalog lacks.
#
# Source: https://github.com/gitleaks/gitleaks, config/gitleaks.toml at commit {commit}
# Licence: MIT, Copyright (c) 2019 Zachary Rice (the rule blocks below are copied verbatim).
# Refresh: python evals/sets/secrets/refresh_gitleaks_rules.py --gitleaks PATH
# Read by factbank.redact.redaction: Kingfisher compiles each regex, redaction applies
# gitleaks' entropy floor, allowlists (regexes, regexTarget, stopwords) to what it reports.

title = "gitleaks rules not in Kingfisher's catalog"
"""


def _git(path: Path, *args: str) -> str:
    bare = (path / "HEAD").exists() and not (path / ".git").exists()
    where = ["--git-dir", str(path)] if bare else ["-C", str(path)]
    return subprocess.run(["git", *where, *args], check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gitleaks", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    commit = _git(args.gitleaks, "rev-parse", "HEAD").strip()
    text = _git(args.gitleaks, "show", f"{commit}:config/gitleaks.toml")
    known = {
        m["id"].removeprefix("betterleaks.").split(".")[0]
        for m in Rules(confidence="low").metadata()
    }
    blocks = text.split("\n[[rules]]\n")[1:]
    keep = []
    for block in blocks:
        rule = tomllib.loads("[[rules]]\n" + block)["rules"][0]
        if rule["id"] in known or "regex" not in rule:
            continue
        keep.append("[[rules]]\n" + block.rstrip() + "\n")
    args.out.write_text(HEADER.format(commit=commit) + "\n" + "\n".join(keep), encoding="utf-8")
    ids = [tomllib.loads(b)["rules"][0]["id"] for b in keep]
    print(f"{args.out}: {len(ids)} rules from gitleaks {commit[:12]}: {', '.join(ids)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
