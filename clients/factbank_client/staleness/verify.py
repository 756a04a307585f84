"""`factbank verify`'s judgement: each file- or commit-sourced fact of this project against the
working tree here. The client has the files; the server only applies the verdicts
(`POST /v1/facts/verify`, docs/staleness.md).

Per fact, in this order:

* the file is there and its blob is the fingerprint's: **fresh** (nothing in it changed; no
  need to read it). This is the common case and costs one hash of the file.
* the file changed, the quote (whitespace normalised, as `factbank add` checked it) is still
  at the fact's line: **fresh**, with the new fingerprint (so the next verify takes the fast
  path again).
* the quote is elsewhere in the file: **moved** to the occurrence nearest the old line (the
  server updates the location and records `relocated`); a location without a line stays as it
  is (fresh with the new fingerprint: nothing the fact says moved).
* the quote is gone: **stale**, with the reason (`the quote changed at path:14: now '...'`)
  and the new text around the old line.
* the file is gone: renamed (git's rename detection, `git diff -M` from the fingerprint's
  commit to the working tree, or the renames in HEAD's history when the fact has no commit)
  and the quote is in the new file: **moved** there ("relocated when the rename is clean");
  renamed but the quote is not in it, or deleted: **stale** with the reason.
* a `commit` source whose commit is here but no longer reachable from any branch, tag or
  remote-tracking ref (a rebase or a force-push dropped it): **stale**. A commit that is not
  in this repository at all is a teammate's this machine has not fetched: **unknown**,
  skipped and listed, never stale (stale needs evidence, and a checkout that is behind has
  none).

A fact this checkout cannot judge (a commit source outside git) is skipped locally and
listed, never guessed. A location is a teammate's text, so it is read only through
`safefs.read`: a path that leaves the repository (`..`, absolute, `~`, a link out
of it), a NUL byte, an overlong path, git's own directory, or a file git ignores here (`.env`:
this machine's own, never another member's evidence) is skipped and never opened, so none of
its lines can come back to the bank as a stale fact's context, nor even whether the quote is
in it. A fact's commit being unreachable does not make a *file* fact stale: the file in the
working tree is the evidence, the commit only helps find renames.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factbank_client import safefs
from factbank_client.client import quote_spans
from factbank_client.errors import UnsafePath
from factbank_client.staleness import fingerprint as fpr

_LOCATION = re.compile(r"^(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$")
CONTEXT_RADIUS = 2  # lines either side of the old line in a stale fact's context
MAX_CONTEXT = 2000  # the server keeps at most 2000 characters of it
MAX_REASON_TEXT = 120  # the new line's text quoted in a reason


@dataclass
class Verdict:
    """One fact's verdict, as the verify route takes it, and where it was (for the text)."""

    id: int
    verdict: str  # fresh | moved | stale
    was: str  # the location before
    location: str | None = None
    fingerprint: dict | None = None
    reason: str | None = None
    context: str | None = None
    bank: str = ""

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "verdict": self.verdict}
        for key in ("location", "fingerprint", "reason", "context"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass
class Skip:
    id: int
    reason: str
    bank: str = ""


@dataclass
class Repo:
    """The checkout facts are judged against, with git's answers cached per run."""

    root: Path
    _renames: dict[str | None, dict[str, str]] = field(default_factory=dict)
    _reachable: dict[str, bool] = field(default_factory=dict)
    _heads: dict[str | None, tuple[str | None, str | None]] = field(default_factory=dict)
    _ignored: list[str] | None = None

    def head(self, root: Path | None, rel: str | None) -> tuple[str | None, str | None]:
        """fingerprint.head_state, asked once per path in a run (many facts share a file)."""
        if rel not in self._heads:
            self._heads[rel] = fpr.head_state(root, rel)
        return self._heads[rel]

    @property
    def git(self) -> bool:
        return fpr.is_git_repo(self.root)

    def renames(self, commit: str | None) -> dict[str, str]:
        """old path -> new path, from `commit` to the working tree (tracked files, staged
        renames included), or along HEAD's history and then to the working tree."""
        if commit in self._renames:
            return self._renames[commit]
        found: dict[str, str] = {}
        if self.git:
            if commit and self.exists(commit):
                found = _name_status(fpr.git_lines(self.root, "diff", "-M", "--name-status",
                                                   "-z", commit))
            else:
                history = fpr.git_lines(self.root, "log", "-M", "--diff-filter=R",
                                        "--name-status", "-z", "--format=", "HEAD")
                # newest first: apply the oldest rename first so chains resolve forward
                for chunk in reversed(_name_status_pairs(history)):
                    found[chunk[0]] = chunk[1]
                found.update(_name_status(fpr.git_lines(self.root, "diff", "-M",
                                                        "--name-status", "-z", "HEAD")))
        self._renames[commit] = found
        return found

    def renamed(self, path: str, commit: str | None) -> str | None:
        mapping = self.renames(commit)
        seen = {path}
        now = mapping.get(path)
        while now is not None and now in mapping and mapping[now] not in seen:
            seen.add(now)
            now = mapping[now]
        return now

    def ignored(self, rel: str) -> bool:
        """Whether git ignores `rel` here (an untracked file matching .gitignore, or one in an
        ignored directory). One `git ls-files` per run (ignored directories come back as one
        `dir/` entry each), not one `git check-ignore` per path."""
        if not self.git:
            return False
        if self._ignored is None:
            out = fpr.git_lines(self.root, "ls-files", "-z", "--others", "--ignored",
                                "--exclude-standard", "--directory")
            self._ignored = [p for line in out for p in line.split("\0") if p]
        return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in self._ignored)

    def ignored_path(self, path: str) -> bool:
        """`ignored` for a path as a bank gives it (False when safefs refuses it anyway)."""
        try:
            real = safefs.inside(self.root, path)
        except UnsafePath:
            return False
        return self.ignored(os.path.relpath(real, os.path.realpath(self.root)))

    def read(self, rel: str) -> bytes:
        """The bytes of `rel`, read only when it is inside the repository and not ignored
        (UnsafePath otherwise; FileNotFoundError when it is not there)."""
        real = safefs.inside(self.root, rel)
        if self.ignored(os.path.relpath(real, os.path.realpath(self.root))):
            raise UnsafePath(f"{rel} is ignored by git here: this machine's own file")
        return safefs.read(self.root, rel)[1]

    def exists(self, commit: str) -> bool:
        if not commit or commit.startswith("-") or "\0" in commit:  # a bank's text, never an option
            return False
        return fpr.git(self.root, "cat-file", "-e", f"{commit}^{{commit}}") is not None

    def reachable(self, commit: str) -> bool:
        """The commit exists and some branch, tag or remote-tracking ref contains it."""
        if commit not in self._reachable:
            ok = self.exists(commit) and bool(fpr.git(
                self.root, "for-each-ref", "--count=1", "--contains", commit,
                "--format=%(refname)"))
            self._reachable[commit] = ok
        return self._reachable[commit]


def _name_status_pairs(lines: list[str]) -> list[tuple[str, str]]:
    """(old, new) of each rename in `git ... --name-status -z` output."""
    fields = [f for line in lines for f in line.split("\0")]
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(fields):
        status = fields[i].strip()
        if not status:
            i += 1
            continue
        if status[:1] in ("R", "C") and i + 2 < len(fields):
            if status[0] == "R":
                pairs.append((fields[i + 1], fields[i + 2]))
            i += 3
        else:
            i += 2
    return pairs


def _name_status(lines: list[str]) -> dict[str, str]:
    return dict(_name_status_pairs(lines))


def _context(lines: list[str], line: int | None, count: int = 1) -> str:
    """The text around `line` now, numbered ("13: server:"), at most MAX_CONTEXT chars."""
    if not lines:
        return ""
    at = min(max(line or 1, 1), len(lines))
    lo = max(1, at - CONTEXT_RADIUS)
    hi = min(len(lines), at + count - 1 + CONTEXT_RADIUS)
    return "\n".join(f"{n}: {lines[n - 1].rstrip()}" for n in range(lo, hi + 1))[:MAX_CONTEXT]


def _quoted(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_TEXT else text[: MAX_REASON_TEXT - 3] + "..."


def _changed_reason(path: str, line: int | None, lines: list[str]) -> str:
    if line is not None and 1 <= line <= len(lines):
        return f"the quote changed at {path}:{line}: now '{_quoted(lines[line - 1])}'"
    if line is not None:
        return f"the quote is no longer in {path} (line {line} is past its end, {len(lines)})"
    return f"the quote is no longer in {path}"


def _nearest(spans: list[tuple[int, int]], line: int | None) -> tuple[int, int]:
    if line is None:
        return spans[0]
    return min(spans, key=lambda s: (abs(s[0] - line), s[0]))


def check_file(fact: dict, repo: Repo) -> Verdict | Skip:
    fid = int(fact["id"])
    loc = str((fact.get("source") or {}).get("location") or "")
    fp = fact.get("fingerprint") or {}
    m = _LOCATION.match(loc.strip())
    if not m:
        return Skip(fid, f"no file in its location {loc!r}")
    start = int(m.group("start")) if m.group("start") else None
    end = int(m.group("end")) if m.group("end") else start
    path = str(fp.get("path") or m.group("path"))
    try:
        real = safefs.inside(repo.root, path)
    except UnsafePath as exc:
        return Skip(fid, f"not read: {exc}")
    if os.path.isabs(path):
        path = Path(os.path.relpath(real, os.path.realpath(repo.root))).as_posix()
    old_line = fp.get("line") or start
    count = fp.get("lines") or ((end - start + 1) if start and end else 1)
    quote = str(fact.get("quote") or "")

    def located(new_path: str, first: int) -> str:
        if start is None:
            return new_path
        return f"{new_path}:{first}" + (f"-{first + (end or start) - start}"
                                         if end and end != start else "")

    try:
        data: bytes | None = repo.read(path)
    except FileNotFoundError:
        data = None
    except (UnsafePath, OSError) as exc:
        return Skip(fid, f"not read: {exc}")
    if data is not None:
        blob = fp.get("file_blob")
        if blob and fpr.file_id(data, repo.root if repo.git else None, fp.get("commit")) == blob:
            return Verdict(fid, "fresh", loc)
        lines = fpr.file_lines(data)
        spans = quote_spans(data.decode("utf-8", "replace"), quote)
        if not spans:
            return Verdict(fid, "stale", loc, reason=_changed_reason(path, old_line, lines),
                           context=_context(lines, old_line, count))
        first, last = _nearest(spans, old_line)
        new_fp = fpr.build(data, path, first, last, repo.root if repo.git else None,
                           repo.head)
        new_loc = located(path, first)
        if start is None or new_loc == loc or first == start:
            return Verdict(fid, "fresh", loc, fingerprint=new_fp)
        return Verdict(fid, "moved", loc, location=new_loc, fingerprint=new_fp)

    new_path = repo.renamed(path, fp.get("commit")) if repo.git else None
    data = None
    if new_path:
        try:
            data = repo.read(new_path)
        except FileNotFoundError:
            pass
        except (UnsafePath, OSError) as exc:
            return Skip(fid, f"{path} was renamed to {new_path}, not read: {exc}")
    if new_path and data is not None:
        lines = fpr.file_lines(data)
        spans = quote_spans(data.decode("utf-8", "replace"), quote)
        if spans:
            first, last = _nearest(spans, old_line)
            return Verdict(fid, "moved", loc, location=located(new_path, first),
                           fingerprint=fpr.build(data, new_path, first, last, repo.root,
                                                 repo.head))
        return Verdict(fid, "stale", loc,
                       reason=f"{path} was renamed to {new_path} and the quote is no longer "
                              "in it", context=_context(lines, old_line, count))
    return Verdict(fid, "stale", loc, reason=f"{path} was deleted", context="")


def check_commit(fact: dict, repo: Repo) -> Verdict | Skip:
    fid = int(fact["id"])
    loc = str((fact.get("source") or {}).get("location") or "").strip()
    if not repo.git:
        return Skip(fid, "a commit source, and this is not a git repository")
    commit = (fact.get("fingerprint") or {}).get("commit") or loc
    if not commit:
        return Skip(fid, "a commit source without a commit")
    if repo.reachable(commit):
        return Verdict(fid, "fresh", loc)
    if not repo.exists(commit):
        # A teammate's commit this machine has not fetched yet is unknown here, not stale:
        # stale needs evidence, and a checkout that is behind has none.
        return Skip(fid, f"commit {commit[:12]} is not in this repository here (not fetched "
                         "yet?): unknown, left as it is")
    return Verdict(fid, "stale", loc, context="",
                   reason=f"commit {commit[:12]} is no longer reachable from any branch or tag")


def check(fact: dict, repo: Repo) -> Verdict | Skip:
    kind = (fact.get("source") or {}).get("kind")
    if kind == "file":
        return check_file(fact, repo)
    if kind == "commit":
        return check_commit(fact, repo)
    return Skip(int(fact["id"]), f"source kind {kind!r} has nothing to check here")
