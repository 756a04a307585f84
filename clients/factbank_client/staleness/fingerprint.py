"""What a fact's source looked like when it was saved: the client has the file, the
server never reads it, so the client records it and `factbank verify` compares against it.

One module for every way a fact is written: `client.new_fact` (so `factbank add`, `supersede`,
the MCP `add`/`supersede` tools and `migrate-native`) calls `for_file` and `for_commit`; Pi's
extension mirrors the same few lines in TypeScript (assets/pi/factbank.ts, `fingerprintOf`),
and a test holds the two to the same digests for the same file.

The fields (the server's `Fingerprint`, services/factbank/models.py):

* `quote_sha256`: sha256 of the quoted region as it stood: the lines the quote spans, each
  with trailing blanks stripped, joined by "\\n". A region, not the quote, so a verify that
  finds the quote's words again can still tell the lines around it changed; trailing blanks
  stripped because editors strip them on save and that changes no claim.
* `path`, `line`, `lines`: where it was (repo-relative, POSIX), the first line and how many.
* `file_blob`: `git hash-object` of the file (computed here: sha1 of "blob <size>\\0" + bytes,
  sha256 in a sha256 repository), or `sha256:<hex>` outside git. `verify`'s fast path: the
  same blob means nothing in the file changed, no need to look for the quote.
* `commit`: HEAD when the file is in a git repository, and `dirty` when the file differed
  from HEAD's version (uncommitted edits, or not tracked). For a `commit` source, the commit
  itself (resolved to its full id when the repository has it).
* `symbol`, `symbol_sha256`: for a symbol source (`path::Qualified.name`), the symbol and the
  sha256 of its normalised text (code/anchor.py); `line`, `lines` and `quote_sha256` are then
  the symbol's whole span.

Git is asked once per fact (`git rev-parse HEAD HEAD:<path>`, 3-6 ms); the hashes are read
from the bytes here. Nothing is raised: a fact without a fingerprint is still a fact (verify
then falls back to looking for the quote at its location).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

GIT_TIMEOUT = 10.0
_HEX = re.compile(r"^[0-9a-fA-F]{7,64}$")


def git(root: Path, *args: str, input: bytes | None = None) -> str | None:
    """`git -C root ARGS`'s stdout (stripped), or None when git fails or is missing."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], input=input,
                              capture_output=True, timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace").strip()


def git_lines(root: Path, *args: str) -> list[str]:
    """`git` output as lines, even when git exits non-zero (rev-parse prints what it could)."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return done.stdout.decode("utf-8", "replace").splitlines()


def is_git_repo(root: Path | None) -> bool:
    return root is not None and (root / ".git").exists()


def blob_id(data: bytes, *, sha256: bool = False) -> str:
    """`git hash-object` of these bytes (no filters), sha1 or a sha256 repository's."""
    h = hashlib.sha256() if sha256 else hashlib.sha1()  # git's object id
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def content_id(data: bytes) -> str:
    """The file's id outside git: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def region_sha256(lines: list[str], first: int, count: int) -> str:
    """sha256 of lines first..first+count-1 (1-based), each right-stripped, joined by \\n."""
    region = lines[first - 1: first - 1 + count]
    return hashlib.sha256("\n".join(x.rstrip() for x in region).encode("utf-8")).hexdigest()


def quote_digest(quote: str) -> str:
    """sha256 of a quote with its whitespace collapsed (a commit source has no region)."""
    return hashlib.sha256(" ".join(quote.split()).encode("utf-8")).hexdigest()


def file_lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").splitlines()


def file_id(data: bytes, root: Path | None, commit: str | None) -> str:
    """The blob the server stores: git's object id in a repository (sha256 when its commit ids
    are 64 hex), else the content hash."""
    if root is not None and is_git_repo(root):
        return blob_id(data, sha256=bool(commit and len(commit) == 64))
    return content_id(data)


def head_state(root: Path | None, rel: str | None) -> tuple[str | None, str | None]:
    """(HEAD's commit, the blob `rel` has at HEAD); None for what git does not have."""
    if root is None or not is_git_repo(root):
        return None, None
    out = [x.strip() for x in git_lines(root, "rev-parse", "HEAD",
                                         *([f"HEAD:{rel}"] if rel is not None else []))]
    commit = out[0] if out and _HEX.match(out[0]) else None
    blob = out[1] if rel is not None and len(out) > 1 and _HEX.match(out[1]) else None
    return commit, blob


def build(data: bytes, rel: str, first: int, last: int, root: Path | None,
          head: Callable[[Path | None, str | None], tuple[str | None, str | None]]
          = head_state) -> dict[str, Any]:
    """The fingerprint of lines first..last of a file whose bytes are `data`. `head`: how
    HEAD's state is asked (verify passes one that remembers its answers for the run)."""
    lines = file_lines(data)
    commit, head_blob = head(root, rel if root is not None else None)
    blob = file_id(data, root, commit)
    fp: dict[str, Any] = {"quote_sha256": region_sha256(lines, first, last - first + 1),
                          "path": rel[:1000], "line": first, "lines": last - first + 1,
                          "file_blob": blob}
    if commit:
        fp["commit"] = commit
        fp["dirty"] = head_blob != blob
    return fp


def for_file(check: Any, root: Path | None) -> dict[str, Any] | None:
    """The fingerprint of a quote `client.check_file_quote` found (its `QuoteCheck`): the first
    occurrence the location names, of the bytes the check read (never a second read of a path
    that may have changed since: safefs). None when the check read no file."""
    path: Path | None = getattr(check, "path", None)
    spans = getattr(check, "spans", None)
    data: bytes | None = getattr(check, "data", None)
    if path is None or not spans or data is None:
        return None
    rel = relative(path, root)
    first, last = spans[0]
    symbol = getattr(check, "symbol", None)
    if symbol is not None:
        first, last = symbol.start_line, symbol.end_line
    fp = build(data, rel if rel is not None else str(path), first, last,
               root if rel is not None else None)
    return with_symbol(fp, symbol)


def with_symbol(fp: dict[str, Any], symbol: Any) -> dict[str, Any]:
    """A symbol source's fingerprint (docs/staleness.md#symbol-anchors): `line`/`lines` and
    `quote_sha256` are of the symbol's span, plus its name and the digest of its normalised
    text (code/anchor.py), which is what verify compares."""
    if symbol is not None:
        fp["symbol"] = symbol.qualname
        fp["symbol_sha256"] = symbol.digest
    return fp


def relative(path: Path, root: Path | None) -> str | None:
    if root is None:
        return None
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def for_commit(location: str, quote: str, root: Path | None) -> dict[str, Any] | None:
    """A `commit` source's fingerprint: the commit (its full id when this repository has it;
    the id as given when it is hex), and the quote's digest. None when there is no id."""
    ref = location.strip()
    commit = None
    if root is not None and is_git_repo(root) and ref:
        commit = git(root, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
    if not commit and _HEX.match(ref):
        commit = ref.lower()
    if not commit:
        return None
    return {"quote_sha256": quote_digest(quote), "commit": commit}
