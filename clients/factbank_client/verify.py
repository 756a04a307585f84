"""`factbank verify`'s judgement: each file- or commit-sourced fact of this project against the
working tree here (issue 16). The client has the files; the server only applies the verdicts
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

A symbol source (`path::Qualified.name`, docs/staleness.md#symbol-anchors) is judged by the
symbol, not by a line (`check_symbol`): the file's blob unchanged is fresh as above; else the
file is parsed (code/anchor.py) and the fact is **fresh** while a definition of that name in
the file has the fingerprint's digest and still holds the quote (lines above it or the
symbol's own whitespace and comments may have changed: the new span is recorded); **moved**
when the symbol is not in its file any more but a definition with the same digest holding
the quote is: in the same file under another name (its class renamed), or in another file
changed since the fingerprint's commit (renamed or not, untracked included; the same name
first); **stale** when its body changed (the new text is the context) or it is gone.

A fact this checkout cannot judge (a commit source outside git) is skipped locally and
listed, never guessed. A location is a teammate's text, so it is read only through
`safefs.read` (issue 21): a path that leaves the repository (`..`, absolute, `~`, a link out
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

from factbank_client import fingerprint as fpr
from factbank_client import safefs, schema
from factbank_client.client import quote_spans

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
    _anchors: dict[str, list[Any]] = field(default_factory=dict)
    _changed: dict[str | None, list[str]] = field(default_factory=dict)
    # How many changed files a symbol that left its file is looked for in. A session-start or
    # prompt check passes a small number (it must stay fast); `factbank verify` the default.
    symbol_search: int = 500

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
        except safefs.UnsafePath:
            return False
        return self.ignored(os.path.relpath(real, os.path.realpath(self.root)))

    def read(self, rel: str) -> bytes:
        """The bytes of `rel`, read only when it is inside the repository and not ignored
        (safefs.UnsafePath otherwise; FileNotFoundError when it is not there)."""
        real = safefs.inside(self.root, rel)
        if self.ignored(os.path.relpath(real, os.path.realpath(self.root))):
            raise safefs.UnsafePath(f"{rel} is ignored by git here: this machine's own file")
        return safefs.read(self.root, rel)[1]

    def anchors(self, rel: str, data: bytes) -> list[Any]:
        """The definitions of `rel` (bytes `data`) with their digests, parsed once per run.
        ImportError when the grammars are not installed."""
        if rel not in self._anchors:
            from factbank_client.code import anchor

            self._anchors[rel] = anchor.anchors(data, rel)
        return self._anchors[rel]

    def changed(self, commit: str | None) -> list[str]:
        """Files of a language with symbols that differ between `commit` (HEAD~1 when it is
        not here: the last commit and the working tree) and the working tree, untracked ones
        included: where a symbol that left its file may have gone."""
        if commit in self._changed:
            return self._changed[commit]
        found: list[str] = []
        if self.git:
            base = commit if commit and self.exists(commit) else "HEAD~1"
            out = fpr.git_lines(self.root, "diff", "--name-only", "-z", base, "--")
            if not out and base == "HEAD~1":
                out = fpr.git_lines(self.root, "diff", "--name-only", "-z", "HEAD", "--")
            out += fpr.git_lines(self.root, "ls-files", "-z", "--others", "--exclude-standard")
            seen: set[str] = set()
            for line in out:
                for p in line.split("\0"):
                    if p and p not in seen and schema.symbol_language(p):
                        seen.add(p)
                        found.append(p)
        self._changed[commit] = found
        return found

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
    if schema.split_symbol(loc) is not None:
        return check_symbol(fact, repo)
    m = _LOCATION.match(loc.strip())
    if not m:
        return Skip(fid, f"no file in its location {loc!r}")
    start = int(m.group("start")) if m.group("start") else None
    end = int(m.group("end")) if m.group("end") else start
    path = str(fp.get("path") or m.group("path"))
    try:
        real = safefs.inside(repo.root, path)
    except safefs.UnsafePath as exc:
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
    except (safefs.UnsafePath, OSError) as exc:
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
        except (safefs.UnsafePath, OSError) as exc:
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


def _symbol_context(a: Any) -> str:
    """A symbol's text now, numbered from its first line, at most MAX_CONTEXT chars."""
    return "\n".join(f"{a.start_line + i}: {line.rstrip()}"
                     for i, line in enumerate(a.text.splitlines()))[:MAX_CONTEXT]


def check_symbol(fact: dict, repo: Repo) -> Verdict | Skip:
    """A symbol-anchored fact (see the module docstring)."""
    fid = int(fact["id"])
    loc = str((fact.get("source") or {}).get("location") or "").strip()
    fp = fact.get("fingerprint") or {}
    if problem := schema.symbol_problem(loc):
        return Skip(fid, f"not a symbol source: {problem}")
    loc_path, name = schema.split_symbol(loc) or ("", "")
    path = str(fp.get("path") or loc_path)
    try:
        real = safefs.inside(repo.root, path)
    except safefs.UnsafePath as exc:
        return Skip(fid, f"not read: {exc}")
    if os.path.isabs(path):
        path = Path(os.path.relpath(real, os.path.realpath(repo.root))).as_posix()
    digest = fp.get("symbol_sha256")
    old_line = fp.get("line")
    quote = str(fact.get("quote") or "")
    sep = schema.SYMBOL_SEPARATOR

    def holds(a: Any, text: str) -> bool:
        if digest and a.digest != digest:
            return False
        return any(x >= a.start_line and y <= a.end_line for x, y in quote_spans(text, quote))

    def anchored(rel: str, data: bytes, a: Any) -> dict:
        return fpr.with_symbol(fpr.build(data, rel, a.start_line, a.end_line,
                                         repo.root if repo.git else None, repo.head), a)

    try:
        data: bytes | None = repo.read(path)
    except FileNotFoundError:
        data = None
    except (safefs.UnsafePath, OSError) as exc:
        return Skip(fid, f"not read: {exc}")
    changed_body: tuple[str, Any] | None = None  # where the name is, with another body
    try:
        if data is not None:
            blob = fp.get("file_blob")
            if blob and fpr.file_id(data, repo.root if repo.git else None,
                                    fp.get("commit")) == blob:
                return Verdict(fid, "fresh", loc)
            text = data.decode("utf-8", "replace")
            here = repo.anchors(path, data)
            same = [a for a in here if a.qualname == name]
            for a in sorted(same, key=lambda a: abs(a.start_line - (old_line or a.start_line))):
                if holds(a, text):
                    new_loc = f"{path}{sep}{name}"
                    return Verdict(fid, "fresh" if new_loc == loc else "moved", loc,
                                   location=None if new_loc == loc else new_loc,
                                   fingerprint=anchored(path, data, a))
            if same:
                from factbank_client.code.anchor import nearest

                changed_body = (path, nearest(same, old_line))
            elif digest:
                for a in here:
                    if a.digest == digest and holds(a, text):
                        return Verdict(fid, "moved", loc, location=f"{path}{sep}{a.qualname}",
                                       fingerprint=anchored(path, data, a),
                                       reason=f"{name} is now {a.qualname}")
        if changed_body is None:
            moved = _look_elsewhere(fid, loc, path, name, fp, repo, holds, anchored)
            if isinstance(moved, Verdict | Skip):
                return moved
            changed_body = moved
    except ImportError:
        return Skip(fid, "a symbol source, and the tree-sitter grammars are not installed "
                         "here (they come with factbank: reinstall it)")
    if changed_body is not None:
        where, a = changed_body
        at = f"{where}:{a.start_line}-{a.end_line}"
        what = "its body changed" if where == path else f"it moved to {where} and its body " \
            "changed"
        if digest and a.digest == digest:
            what = "the quote is no longer in it"
        return Verdict(fid, "stale", loc, reason=f"{name}: {what} ({at})",
                       context=_symbol_context(a))
    gone = f"{path} was deleted" if data is None else f"{name} is no longer defined in {path}"
    return Verdict(fid, "stale", loc, context="",
                   reason=f"{gone}, nor in the files changed since (searched "
                          f"{len(repo.changed(fp.get('commit')))})")


def _look_elsewhere(fid: int, loc: str, path: str, name: str, fp: dict, repo: Repo,
                    holds: Any, anchored: Any) -> Verdict | Skip | tuple[str, Any] | None:
    """A symbol that left its file, looked for in the files changed since the fingerprint's
    commit (git's rename target first): the same name holding (moved), then any definition
    with the same digest holding (moved, renamed container), else where the name is with
    another body (for the stale reason), else None."""
    if not repo.git:
        return None
    candidates = [p for p in repo.changed(fp.get("commit")) if p != path]
    renamed = repo.renamed(path, fp.get("commit"))
    if renamed and renamed in candidates:
        candidates.remove(renamed)
        candidates.insert(0, renamed)
    if len(candidates) > repo.symbol_search:
        return Skip(fid, f"{name} left {path}; {len(candidates)} files changed, more than the "
                         f"{repo.symbol_search} looked through here: unknown, left as it is")
    digest = fp.get("symbol_sha256")
    other: tuple[str, Any] | None = None
    by_digest: tuple[str, bytes, Any] | None = None
    sep = schema.SYMBOL_SEPARATOR
    for rel in candidates:
        try:
            data = repo.read(rel)
        except (FileNotFoundError, safefs.UnsafePath, OSError):
            continue
        text = data.decode("utf-8", "replace")
        for a in repo.anchors(rel, data):
            if a.qualname == name and holds(a, text):
                return Verdict(fid, "moved", loc, location=f"{rel}{sep}{name}",
                               fingerprint=anchored(rel, data, a),
                               reason=f"{name} moved from {path} to {rel}")
            if a.qualname == name and other is None:
                other = (rel, a)
            if digest and by_digest is None and a.digest == digest and holds(a, text):
                by_digest = (rel, data, a)
    if by_digest is not None:
        rel, data, a = by_digest
        return Verdict(fid, "moved", loc, location=f"{rel}{sep}{a.qualname}",
                       fingerprint=anchored(rel, data, a),
                       reason=f"{name} moved from {path} to {rel} as {a.qualname}")
    return other


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
