"""Cite what the reader has: the repository's code, tests and docs never send the reader to an
issue by its number (the word followed by a number, with or without "#"). The tracker is not
in the repository, so such a reference tells a reader of the code nothing; where it carried a
reason, the text says the reason, or cites docs/principles.md by heading.

What is scanned: every file git tracks (or, outside a checkout, every file under the
repository), as text. The exceptions record the past and are kept as written:

* `evals/reports/<date>/`: dated eval reports, each a record of one run at one commit, and
  the issue it answered is part of that record;
* `CHANGELOG*` / `HISTORY*` files at any depth: history by definition (none today).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ISSUE_NUMBER = re.compile(r"\bissues?[ _-]?#?\d+", re.IGNORECASE)
DATED_REPORT = re.compile(r"^evals/reports/\d{4}-\d{2}-\d{2}/")
HISTORY = re.compile(r"(^|/)(CHANGELOG|HISTORY)[^/]*$", re.IGNORECASE)
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".ruff_cache", ".pytest_cache"}


def exempt(rel: str) -> bool:
    return bool(DATED_REPORT.match(rel) or HISTORY.search(rel))


def repository_files() -> list[str]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                             check=True, timeout=60).stdout.decode()
        return [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and not SKIP_DIRS & set(p.relative_to(ROOT).parts)]


def references(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE_NUMBER.finditer(text)]


def test_the_pattern_and_the_exceptions() -> None:
    issue = "iss" + "ue"  # spelled in two so that this file does not hold what it looks for
    text = (f"see {issue} 16; {issue.title()} #21 A4; {issue}s 12 and 13; {issue}-7; "
            f"an {issue} with the cache; {issue}d 3 tokens; tissue 5")
    assert references(text) == [f"{issue} 16", f"{issue.title()} #21", f"{issue}s 12",
                                f"{issue}-7"]
    assert exempt("evals/reports/2026-12-02/staleness.md") and exempt("CHANGELOG.md")
    assert exempt("docs/HISTORY.md") and exempt("clients/CHANGELOG")
    assert not exempt("evals/reports/fusion-notes.md") and not exempt("docs/operations.md")


def test_no_issue_numbers_in_code_tests_or_docs() -> None:
    found = []
    for rel in repository_files():
        path = ROOT / rel
        if exempt(rel) or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            found += [f"{rel}:{n}: {ref}" for ref in references(line)]
    assert not found, ("say the reason, or cite docs/principles.md, instead of the issue:\n"
                       + "\n".join(found))
