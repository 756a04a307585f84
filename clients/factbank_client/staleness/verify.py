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
  and the new text around the old line; when git's diff shows which line replaced it, the
  fact with that line as its quote goes along as a `successor` for the review queue.
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
from factbank_client.errors import UnsafePath
from factbank_client.staleness import fingerprint as fpr
from factbank_client.staleness import successor
from factbank_client.staleness.quotes import quote_spans
from factbank_common import schema

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
    successor: dict | None = None  # stale: the changed line, proposed for review (successor.py)

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "verdict": self.verdict}
        for key in ("location", "fingerprint", "reason", "context", "successor"):
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
    # Where the checkout ends: () the working tree, ("HEAD",) the last commit (CommittedRepo):
    # the revision renames and changed files are followed up to.
    upto: tuple[str, ...] = ()
    # Verdicts only, no new fingerprints (each asks git for HEAD): the hooks' check before
    # inject (worktree.py) needs "holds here or not", never a fingerprint to send.
    judge_only: bool = False

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
                                                   "-z", commit, *self.upto))
            else:
                history = fpr.git_lines(self.root, "log", "-M", "--diff-filter=R",
                                        "--name-status", "-z", "--format=", "HEAD")
                # newest first: apply the oldest rename first so chains resolve forward
                for chunk in reversed(_name_status_pairs(history)):
                    found[chunk[0]] = chunk[1]
                if not self.upto:  # then on to the working tree
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
            out = fpr.git_lines(self.root, "diff", "--name-only", "-z", base, *self.upto, "--")
            if not self.upto:  # the working tree: its own edits and untracked files too
                if not out and base == "HEAD~1":
                    out = fpr.git_lines(self.root, "diff", "--name-only", "-z", "HEAD", "--")
                out += fpr.git_lines(self.root, "ls-files", "-z", "--others",
                                     "--exclude-standard")
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


def _name_status_entries(lines: list[str]) -> list[tuple[str, str, str | None]]:
    """(status letter, old path, new path or None) of each entry in `git ... --name-status
    -z` output: renames and copies carry two paths, every other status one."""
    fields = [f for line in lines for f in line.split("\0")]
    entries: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(fields):
        status = fields[i].strip()
        if not status:
            i += 1
            continue
        if status[:1] in ("R", "C") and i + 2 < len(fields):
            entries.append((status[0], fields[i + 1], fields[i + 2]))
            i += 3
        else:
            if i + 1 < len(fields):
                entries.append((status[:1], fields[i + 1], None))
            i += 2
    return entries


def _name_status_pairs(lines: list[str]) -> list[tuple[str, str]]:
    """(old, new) of each rename in `git ... --name-status -z` output."""
    return [(old, new) for status, old, new in _name_status_entries(lines)
            if status == "R" and new is not None]


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
                           context=_context(lines, old_line, count),
                           successor=successor.propose(repo, fact, path, data, located))
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

    def anchored(rel: str, data: bytes, a: Any) -> dict | None:
        if repo.judge_only:
            return None
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
    except (ValueError, RecursionError, MemoryError) as exc:  # one odd file: this fact only
        return Skip(fid, f"{name}: not parsed here ({type(exc).__name__}: {exc})"[:300])
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


# --- a change before it merges: `factbank verify --diff BASE..HEAD` / `--staged` -----------------


@dataclass
class TreeRepo(Repo):
    """The repository as a revision holds it (`rev`, or the index when `rev` is ""), for
    `check_file`: files are read from git's objects, never from the working tree, and the
    renames are those of the change (`renames_map`), whatever the fact's own commit."""

    rev: str = "HEAD"
    renames_map: dict[str, str] = field(default_factory=dict)
    limit: int = safefs.MAX_READ
    # The files the change touched, as they are named after it: where a symbol that left
    # its file is looked for (check_symbol), instead of the working tree's changes.
    changed_paths: list[str] = field(default_factory=list)
    _blobs: dict[str, bytes | Exception] = field(default_factory=dict)

    def renames(self, commit: str | None) -> dict[str, str]:
        return self.renames_map

    def changed(self, commit: str | None) -> list[str]:
        return [p for p in self.changed_paths if schema.symbol_language(p)]

    def ignored(self, rel: str) -> bool:
        return False  # a tracked file: the same on every machine, evidence for everyone

    def read(self, rel: str) -> bytes:
        """`rel`'s bytes at `rev` (FileNotFoundError when the revision has no such file;
        UnsafePath for a path safefs refuses, or one larger than `limit`). One `git cat-file`
        per path and revision: many facts quote the same file."""
        safefs.inside(self.root, rel)  # what safefs refuses is never asked of git either
        norm = os.path.normpath(rel).replace(os.sep, "/")
        if norm.startswith(("../", "/")) or norm in ("..", "."):
            raise safefs.UnsafePath(f"{rel} is outside the repository")
        if norm not in self._blobs:
            self._blobs[norm] = self._cat(norm)
        data = self._blobs[norm]
        if isinstance(data, Exception):
            raise data
        return data

    def _cat(self, norm: str) -> bytes | Exception:
        import subprocess

        name = f"{self.rev}:{norm}" if self.rev else f":{norm}"
        try:
            proc = subprocess.Popen(["git", "-C", str(self.root), "cat-file", "--batch"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
        except OSError as exc:
            return safefs.UnsafePath(f"git cannot read {norm}: {exc}")
        with proc:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(name.encode("utf-8", "surrogateescape") + b"\n")
            proc.stdin.close()
            header = proc.stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                return FileNotFoundError(f"{norm} is not in {self.rev or 'the index'}")
            size = int(header[2])
            if size > self.limit:
                proc.kill()
                return safefs.UnsafePath(f"{norm} is larger than {self.limit} bytes")
            return proc.stdout.read(size)


@dataclass
class CommittedRepo(TreeRepo):
    """What `factbank verify` tells the bank: the checkout as its last commit holds it. Only a
    commit is evidence for the team (docs/staleness.md): an uncommitted edit or an untracked
    file on one member's machine never makes a fact stale for everyone. Files are read from
    HEAD's objects; renames and the files a symbol may have moved to are those of the history
    up to HEAD, never the working tree's. A file the working tree has and HEAD does not (never
    committed) is not evidence either way: the fact is skipped, not judged gone."""

    upto: tuple[str, ...] = ("HEAD",)
    # Repo's renames and changed files, not the change's (TreeRepo's are for --diff)
    renames = Repo.renames
    changed = Repo.changed

    def read(self, rel: str) -> bytes:
        try:
            return super().read(rel)
        except FileNotFoundError:
            here = os.path.lexists(safefs.inside(self.root, rel))
            if not here:
                raise
            raise safefs.UnsafePath(f"{rel} is not committed: only a commit is evidence "
                                    "for the team") from None


def repo_for(root: Path, *, working_tree: bool = False) -> Repo:
    """The checkout `factbank verify` judges: HEAD's objects (what it tells the bank), or with
    `working_tree` (a local look, `--working-tree`) the files as they are now. Outside git
    there is no commit: the files are all there is."""
    if working_tree or not fpr.is_git_repo(root) or fpr.head_state(root, None)[0] is None:
        return Repo(root)
    return CommittedRepo(root, rev="HEAD")


@dataclass
class Change:
    """What a change does to the tracked files: the revision before (`base`), the one after
    (`head`, "" for the index), the paths it touched (the old side) and its renames."""

    root: Path
    base: str
    head: str
    label: str
    touched: set[str] = field(default_factory=set)
    renames: dict[str, str] = field(default_factory=dict)
    _trees: dict[str, TreeRepo] = field(default_factory=dict)

    def before(self) -> TreeRepo:
        if "before" not in self._trees:
            self._trees["before"] = TreeRepo(self.root, rev=self.base)
        return self._trees["before"]

    def after(self) -> TreeRepo:
        if "after" not in self._trees:
            self._trees["after"] = TreeRepo(
                self.root, rev=self.head, renames_map=self.renames,
                changed_paths=sorted({self.renames.get(p, p) for p in self.touched}))
        return self._trees["after"]


class ChangeError(ValueError):
    """A range git cannot resolve here; the message says which revision."""


def _resolve(root: Path, rev: str) -> str:
    if not rev or rev.startswith("-") or "\0" in rev:
        raise ChangeError(f"{rev!r} is not a revision")
    sha = fpr.git(root, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
    if not sha:
        raise ChangeError(f"{rev!r} is not a commit here (a shallow clone? fetch it first: "
                          "git fetch --depth=100 origin, or actions/checkout's fetch-depth: 0)")
    return sha


def change_of(root: Path, diff: str | None = None, *, staged: bool = False) -> Change:
    """The change `BASE..HEAD` (`BASE...HEAD`: from their merge base, as a pull request shows
    it; `BASE` alone: up to HEAD), or with `staged` what the index holds over HEAD."""
    if staged:
        base, head, label = _resolve(root, "HEAD"), "", "the staged change"
        args = ["diff", "--cached", "-M", "--name-status", "-z", base]
    else:
        text = (diff or "").strip()
        if "..." in text:
            left, right = text.split("...", 1)
            head = _resolve(root, right or "HEAD")
            merge_base = fpr.git(root, "merge-base", _resolve(root, left or "HEAD"), head)
            if not merge_base:
                raise ChangeError(f"{left!r} and {right or 'HEAD'!r} have no common ancestor")
            base = merge_base
        elif ".." in text:
            left, right = text.split("..", 1)
            base, head = _resolve(root, left or "HEAD"), _resolve(root, right or "HEAD")
        else:
            base, head = _resolve(root, text), _resolve(root, "HEAD")
        label = f"{base[:12]}..{head[:12]}"
        args = ["diff", "-M", "--name-status", "-z", base, head]
    out = fpr.git_lines(root, *args)
    touched = {old for status, old, _ in _name_status_entries(out) if status != "C"}
    return Change(root, base, head, label, touched, _name_status(out))


@dataclass
class Effect:
    """What a change does to one fact: `stale` (its quote is gone after it), `moved` (the
    quote is at another line or file after it), `unaffected`, or `unknown` (cannot tell)."""

    id: int
    effect: str
    location: str
    bank: str = ""
    content: str = ""
    quote: str = ""
    new_location: str | None = None
    reason: str | None = None
    new_text: str | None = None  # the text at the old line after the change (stale)


def _follow(change: Change, path: str, where: str, line: int | None
            ) -> tuple[str, int | None, str] | None:
    """Where the change puts the quoted line (`line` of `path` before it, or the line in
    `where` when verify had already moved it): (path after, its line or None when the change
    deletes it, its text). Lines are matched as `git diff` pairs them (difflib's opcodes over
    the two versions): an equal or rewritten line maps to its counterpart, so a rewritten
    quote is shown with the line that replaced it, not with whatever now sits at the old
    number. None when either version cannot be read or there is no line."""
    import difflib

    m = _LOCATION.match(where.strip())
    if m and m.group("start"):
        path, line = m.group("path"), int(m.group("start"))
    if line is None:
        return None
    new_path = change.renames.get(path, path)
    try:
        old = fpr.file_lines(change.before().read(path))
        new = fpr.file_lines(change.after().read(new_path))
    except (FileNotFoundError, safefs.UnsafePath, OSError):
        return None
    i = line - 1
    if not 0 <= i < len(old):
        return None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new,
                                                       autojunk=False).get_opcodes():
        if i1 <= i < i2:
            if tag == "equal" or (tag == "replace" and j2 > j1):
                j = min(j1 + (i - i1), j2 - 1)
                return new_path, j + 1, new[j]
            return new_path, None, ""
    return None


def effect_of(fact: dict, change: Change) -> Effect:
    """The same judgement as `factbank verify` after the merge (check_file), made on the
    revision after the change and, for a fact it touches, on the one before: a fact whose
    quote was already gone before the change is not this change's doing (unaffected, said)."""
    fid = int(fact["id"])
    loc = str((fact.get("source") or {}).get("location") or "")
    fp = fact.get("fingerprint") or {}
    m = _LOCATION.match(loc.strip())
    common = {"content": str(fact.get("content") or ""), "quote": str(fact.get("quote") or "")}
    if (fact.get("source") or {}).get("kind") != "file" or not m:
        return Effect(fid, "unaffected", loc, **common)
    path = str(fp.get("path") or m.group("path"))
    if path not in change.touched:
        return Effect(fid, "unaffected", loc, **common)
    after = check_file(fact, change.after())
    if isinstance(after, Skip):
        return Effect(fid, "unknown", loc, reason=after.reason, **common)
    before = check_file(fact, change.before())
    if isinstance(before, Skip):
        return Effect(fid, "unknown", loc, reason=before.reason, **common)
    if after.verdict == "stale":
        if before.verdict == "stale":
            return Effect(fid, "unaffected", loc, reason="its quote was already gone before "
                          "this change (`factbank verify` marks it on the next run)", **common)
        if schema.split_symbol(loc) is not None:  # a symbol: its body, not a line
            return Effect(fid, "stale", loc, reason=after.reason, **common)
        line = fp.get("line") or (int(m.group("start")) if m.group("start") else None)
        mapped = _follow(change, path, before.location or loc, line)
        if mapped is None:
            return Effect(fid, "stale", loc, reason=after.reason, **common)
        new_path, new_line, text = mapped
        if new_line is None:
            return Effect(fid, "stale", loc, reason=f"the change deletes the quoted line "
                          f"{path}:{line}", **common)
        return Effect(fid, "stale", loc, new_location=f"{new_path}:{new_line}",
                      reason=f"the change rewrites {path}:{line} (now {new_path}:{new_line}: "
                             f"'{_quoted(text)}')", new_text=text.strip() or None, **common)
    was = before.location or before.was
    now = after.location or after.was
    if now != was:
        return Effect(fid, "moved", loc, new_location=now, **common)
    return Effect(fid, "unaffected", loc, **common)


def command_for(row: dict, label: str, bank: str | None = None) -> str | None:
    """The one command that settles an affected fact, for its author to run on the branch of
    the change: a fact that would go stale is superseded (the new claim is theirs to write;
    the quote is the new text at its line, when there is one), a fact that would move is
    confirmed at its new place. None for the others."""
    import shlex

    q = shlex.quote
    tail = f" --bank {q(bank)}" if bank else ""
    if row["effect"] == "stale":
        source = row.get("new_location") or "<path:line where it holds now>"
        quote = " ".join((row.get("new_text") or "").split()) or "<a verbatim quote of it>"
        return (f"factbank supersede {q('<the claim as it is now>')} {row['id']} "
                f"--reason {q(f'changed by {label}')} --source {q(source)} --quote {q(quote)}"
                + tail)
    if row["effect"] == "moved" and row.get("new_location"):
        quote = " ".join(str(row.get("quote") or "").split())
        return (f"factbank confirm {row['id']} --source {q(row['new_location'])} "
                f"--quote {q(quote)}" + tail)
    return None
