"""The successor `verify` proposes when a fact's quoted line changed (the review queue,
docs/staleness.md): the same fact with the new line as its quote, sent with the stale verdict
and queued by the server, never stored until someone accepts it.

The new line must be identifiable, or nothing is proposed: git's diff from the fact's commit
to the working tree (`git diff -U0`) has a hunk covering the quoted lines, and that hunk
replaces them one for one (the i-th old line became the i-th new line), or replaces exactly
the quoted lines by at most two more. A deleted line, a hunk that rewrote a whole block, or
a fact without a commit here has no successor: a guess would put a wrong quote in front of a
reviewer. When the quote was part of its line, the same words around it are kept out of the
new quote ("port: 8080" in "  port: 8080  # api" becomes "port: 9443", not the comment).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from factbank_client.staleness import fingerprint as fpr
from factbank_client.staleness.quotes import quote_spans

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
MAX_EXTRA_LINES = 2  # a hunk may replace the quoted lines by at most this many more


def hunks(root: Path, commit: str, path: str) -> list[tuple[int, int, int, int]]:
    """(old start, old count, new start, new count) of each hunk, `commit` -> working tree."""
    out = []
    for line in fpr.git_lines(root, "diff", "-U0", "--no-color", "--no-ext-diff", commit,
                              "--", path):
        m = _HUNK.match(line)
        if m:
            a, b, c, d = m.groups()
            out.append((int(a), 1 if b is None else int(b), int(c), 1 if d is None else int(d)))
    return out


def new_lines_for(hunk_list: list[tuple[int, int, int, int]], line: int, count: int,
                  lines: list[str]) -> tuple[int, list[str]] | None:
    """Where the quoted lines line..line+count-1 went, and their new text, or None."""
    last = line + count - 1
    for a, b, c, d in hunk_list:
        if b == 0 or not (a <= line and last <= a + b - 1):
            continue
        if b == d:  # one for one: the i-th old line is the i-th new line
            first = c + (line - a)
            new = lines[first - 1: first - 1 + count]
        elif a == line and b == count and 1 <= d <= count + MAX_EXTRA_LINES:
            first, new = c, lines[c - 1: c - 1 + d]
        else:
            return None
        return (first, new) if new and any(x.strip() for x in new) else None
    return None


def new_quote(old_line: str, quote: str, new_line: str) -> str:
    """The new line's words that stand where the quote stood in the old line."""
    old, q, new = old_line.split(), quote.split(), new_line.split()
    for k in range(len(old) - len(q) + 1):
        if old[k: k + len(q)] == q:
            before, after = old[:k], old[k + len(q):]
            end = len(new) - len(after)
            if new[: len(before)] == before and (not after or new[end:] == after) \
                    and end > len(before):
                return " ".join(new[len(before): end])
            break
    return " ".join(new)


def propose(repo: Any, fact: dict, path: str, data: bytes, located) -> dict | None:
    """The successor of a file fact whose quote is gone from `path` (bytes `data`), or None.
    `repo`: verify's Repo; `located(path, first)`: the location as verify writes it."""
    fp = fact.get("fingerprint") or {}
    commit, line = fp.get("commit"), fp.get("line")
    count = int(fp.get("lines") or 1)
    quote = str(fact.get("quote") or "")
    if not (repo.git and commit and line and quote and repo.exists(commit)):
        return None
    lines = fpr.file_lines(data)
    found = new_lines_for(hunks(repo.root, commit, path), int(line), count, lines)
    if found is None:
        return None
    first, new = found
    if count == 1 and len(new) == 1:
        old_text = fpr.git(repo.root, "show", f"{commit}:{path}")
        old_lines = old_text.splitlines() if old_text is not None else []
        was = old_lines[int(line) - 1] if 0 < int(line) <= len(old_lines) else ""
        text = new_quote(was, quote, new[0])
    else:
        text = "\n".join(x.strip() for x in new if x.strip())
    spans = [s for s in quote_spans(data.decode("utf-8", "replace"), text)
             if first <= s[0] <= first + len(new) - 1]
    if not text or not spans:
        return None
    top, bottom = spans[0]
    changed_in = None
    if fpr.git(repo.root, "diff", "--quiet", "HEAD", "--", path) is not None:  # committed
        changed_in = fpr.git(repo.root, "log", "-1", "--format=%H", f"{commit}..HEAD", "--",
                             path) or None
    return {"quote": text, "location": located(path, top),
            "fingerprint": fpr.build(data, path, top, bottom, repo.root, repo.head),
            **({"commit": changed_in} if changed_in else {})}
