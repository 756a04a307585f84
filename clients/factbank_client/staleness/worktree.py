"""Does a fact still hold in the checkout in front of the agent? (docs/staleness.md, "verify
before inject").

`check(fact, root)` is the one working-tree check: it takes a fact as the bank gives it (its
`source`, `quote` and `fingerprint`) and a repository root, reads the working tree as it is
now (uncommitted edits and the current branch included) and answers

* `HOLDS`: the quote is still there (the file is byte-identical to the fingerprint's blob,
  or the quote, whitespace normalised, is somewhere in the file; moved lines still hold);
* `NOT_HOLDING`: the file is readable here and the quote is not in it;
* `UNKNOWN`: this checkout cannot tell: a source kind it does not check, a missing, ignored,
  binary, unreadable or oversized file, a quote whose secret the bank redacted. Unknown
  keeps the fact: leaving a fact out needs evidence, as a stale mark does.

The prompt and session-start hooks call it (`filter_block`) for each fact of their block
that the bank marks as quoting a file of this project, and leave out the facts that do not
hold, naming them. The bank is never told: only a commit is evidence for the team (the
post-commit `factbank verify` does that), and one member's uncommitted experiment must not
hide a fact from the others.

A symbol anchor (`path::Qualified.name`, docs/staleness.md#symbol-anchors) is checked here
too (`_check_symbol`): the file byte-identical holds as above; otherwise the judgement is
`verify.check_symbol`'s, the one that moves and stales symbol facts, against the working
tree: fresh or moved (lines above it changed, its whitespace or comments, moved within the
file or to a changed file) holds; its body changed or its quote gone is not holding; a
symbol this checkout cannot find or parse is unknown. That path loads the grammars and
parses the file (tens of milliseconds on a cold process), so only a changed file pays it.

Cost. The hooks run this on every prompt, so it is standard library only and loads neither
`re` nor `typing` (the hook loads neither: 7.6 and 12.6 ms of CPU in a fresh `python -I -S`;
so the location and the blob id are read with string tests, and factbank_common.schema,
which imports typing, is not imported); `_sha1` is the builtin, ~0.3 ms to import, where
`hashlib` costs ~10 ms), reads each cited file once through `safefs.read_bytes` (inside the
repository only, never through a link, a FIFO never blocks) with a byte bound (`HOOK_LIMIT`:
a larger file is refused by its size before any byte is read, so a huge file costs one
`fstat`), and asks git only when a fact is about to be left out (whether the file is one git
ignores here, like `.env`: then it is this machine's own file, not evidence, and unknown).
Measured in a fresh `python -I -S` with the hook's own modules loaded (import + check of a
block of three file facts, CPU, median of 30 on the loaded 2-core box): 1.9 ms when the files
are unchanged (blob fast path), 2.2 ms when lines were inserted above the quotes (search),
2.4 ms with one fact left out (its `git check-ignore` spawned with posix_spawnp: through
`subprocess` it was ~9 ms; git itself then adds 10-26 ms of wall time, only on that rare path).
"""

from __future__ import annotations

import os

from factbank_client import safefs

TYPE_CHECKING = False  # not `typing`'s: the hooks import this module
if TYPE_CHECKING:
    from pathlib import Path

HOLDS = "holds"
NOT_HOLDING = "not-holding"
UNKNOWN = "unknown"
CHECKED_KINDS = ("file",)  # the source kinds `check` judges (the bank sends these)
HOOK_LIMIT = 1024 * 1024  # bytes: a cited file larger than this is unknown in a hook
BINARY_PROBE = 8192  # a NUL byte in the first 8 KiB: a binary file, unknown
MAX_WHY = 160
# A symbol that left its file is looked for in at most this many changed files in a hook;
# more is unknown (a big refactor's checkout is judged by the post-commit verify instead).
SYMBOL_SEARCH = 20
IGNORE_WAIT = 0.5  # seconds git gets to say whether a file is ignored
SYMBOL_SEPARATOR = "::"  # factbank_common.schema.SYMBOL_SEPARATOR (a test holds them equal)


def split_symbol(location: str) -> tuple[str, str] | None:
    """factbank_common.schema.split_symbol, without importing schema (it imports typing)."""
    path, sep, name = location.strip().partition(SYMBOL_SEPARATOR)
    return (path.strip(), name.strip()) if sep else None


def _location(loc: str) -> tuple[str, str | None] | None:
    r"""(path, start line) as `^(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$` reads
    `loc`, None where it does not match."""
    loc = loc[:-1] if loc.endswith("\n") else loc  # `$` passes a final LF
    if not loc or "\n" in loc:
        return None
    for at in range(1, len(loc)):
        if loc[at] == ":":
            start, dash, end = loc[at + 1:].partition("-")
            if start.isdecimal() and (not dash or end.isdecimal()):
                return loc[:at], start
    return loc, None


def _hex40(text: str) -> bool:
    """`^[0-9a-f]{40}$` (whose `$` also passes a final LF)."""
    return text[40:] in ("", "\n") and len(text) >= 40 and all(
        c in "0123456789abcdef" for c in text[:40])


def quote_in(text: str, quote: str) -> bool:
    """`quote_spans(text, quote) != []`, without the line numbers: the same whitespace rule,
    about ten times cheaper (one split and join, no regex walk)."""
    needle = " ".join(quote.split())
    return bool(needle) and needle in " ".join(text.split())


def _blob(data: bytes, like: str) -> str:
    """`data`'s id in the form of the fingerprint's `like` (git sha1, git sha256 or
    `sha256:<hex>`), computed with the builtin hash modules (hashlib costs a hook ~10 ms)."""
    if like.startswith("sha256:"):
        import _sha256

        return "sha256:" + _sha256.sha256(data).hexdigest()
    header = b"blob %d\0" % len(data)
    if _hex40(like):
        import _sha1

        h = _sha1.sha1(header)
    else:
        import _sha256

        h = _sha256.sha256(header)
    h.update(data)
    return h.hexdigest()


def _ignored(root: str, rel: str) -> bool:
    """Whether git ignores `rel` here (`.env`): this machine's own file, never evidence.
    `git check-ignore` through os.posix_spawnp, not `subprocess` (whose import alone costs a
    hook 4-30 ms), given at most IGNORE_WAIT seconds; when git cannot answer (missing, slow,
    no repository) the file counts as ignored: unknown, the fact stays."""
    if rel.startswith("-"):
        rel = "./" + rel
    try:
        null = os.open(os.devnull, os.O_RDWR)
        try:
            pid = os.posix_spawnp("git", ["git", "-C", root, "check-ignore", "-q", "--", rel],
                                  os.environ, file_actions=[
                                      (os.POSIX_SPAWN_DUP2, null, 0),
                                      (os.POSIX_SPAWN_DUP2, null, 1),
                                      (os.POSIX_SPAWN_DUP2, null, 2)])
        finally:
            os.close(null)
    except OSError:
        return True
    import time

    end = time.monotonic() + IGNORE_WAIT
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return code != 1  # 0: ignored; 1: not ignored; anything else: cannot tell
        if time.monotonic() > end:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
            return True
        time.sleep(0.002)


def _not_evidence(root: str, path: str) -> str | None:
    """Why this working tree's `path` says nothing against a fact, or None when it does: a
    path that leaves the repository is not read, and a file git ignores is this machine's
    own (a quote missing from it is no verdict)."""
    try:
        rel = os.path.relpath(safefs.inside(root, path), os.path.realpath(root))
    except safefs.UnsafePath:
        return f"{path} is not read here"
    if _ignored(root, rel):
        return f"{path} is ignored by git here: this machine's own file"
    return None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_WHY else text[: MAX_WHY - 3] + "..."


def check(fact: dict, root: str | Path, *, limit: int = HOOK_LIMIT) -> tuple[str, str]:
    """(HOLDS | NOT_HOLDING | UNKNOWN, why) for `fact` against the working tree at `root`."""
    source = fact.get("source") or {}
    kind = source.get("kind")
    if kind not in CHECKED_KINDS:
        return UNKNOWN, f"a {kind} source: nothing in the working tree to check"
    loc = str(source.get("location") or "").strip()
    fp = fact.get("fingerprint") or {}
    quote = str(fact.get("quote") or "")
    if not quote.strip() or "[REDACTED" in quote:
        return UNKNOWN, "no quote this checkout can look for"
    if split_symbol(loc) is not None:
        return _check_symbol(fact, os.fspath(root), limit)
    m = _location(loc)
    if not m:
        return UNKNOWN, "no file in its location"
    path = str(fp.get("path") or m[0])
    line = fp.get("line") or m[1]
    where = f"{path}:{line}" if line else path
    root = os.fspath(root)
    try:
        data = safefs.read_bytes(root, path, limit=limit)
    except FileNotFoundError:
        return UNKNOWN, f"{path} is not in this checkout"
    except (safefs.UnsafePath, OSError) as exc:
        return UNKNOWN, f"not read: {_short(str(exc))}"
    blob = fp.get("file_blob")
    if isinstance(blob, str) and blob and _blob(data, blob) == blob:
        return HOLDS, f"{path} is unchanged"
    if b"\0" in data[:BINARY_PROBE]:
        return UNKNOWN, f"{path} is binary"
    if quote_in(data.decode("utf-8", "replace"), quote):
        return HOLDS, f"the quote is in {path}"
    unread = _not_evidence(root, path)
    if unread:
        return UNKNOWN, unread
    return NOT_HOLDING, f"the quote is no longer at {where} in this working tree"


def _check_symbol(fact: dict, root: str, limit: int) -> tuple[str, str]:
    """`check` for a symbol anchor (see the module docstring)."""
    fp = fact.get("fingerprint") or {}
    path, name = split_symbol(str((fact.get("source") or {}).get("location") or "")) or ("", "")
    path = str(fp.get("path") or path)
    try:
        data = safefs.read_bytes(root, path, limit=limit)
    except FileNotFoundError:
        data = None
    except (safefs.UnsafePath, OSError) as exc:
        return UNKNOWN, f"not read: {_short(str(exc))}"
    if data is not None:
        blob = fp.get("file_blob")
        if isinstance(blob, str) and blob and _blob(data, blob) == blob:
            return HOLDS, f"{path} is unchanged"
        if b"\0" in data[:BINARY_PROBE]:
            return UNKNOWN, f"{path} is binary"
    key = ""
    quote = str(fact.get("quote") or "")
    if data is not None:  # the same bytes give the same same-file verdict: remembered
        key = ":".join((str(fact.get("id")), _blob(data, "0" * 40),
                        str(fp.get("symbol_sha256") or ""), _blob(quote.encode(), "0" * 40)))
        if (known := _remembered(key)) is not None:
            return known
    state, why = _judge_symbol(fact, root, limit, path, name, data)
    if key and ((state == HOLDS and why.startswith(f"{name} is unchanged in "))
                or (state == NOT_HOLDING and f"({path}:" in why)):
        _remember(key, (state, why))
    return state, why


SYMBOL_MEMORY = 256  # same-file verdicts remembered (one small JSON file in the cache dir)


def _memory_path() -> str:
    from factbank_client.paths import cache_dir

    return os.path.join(cache_dir(), "symbol-checks.json")


def _remembered(key: str) -> tuple[str, str] | None:
    """A symbol check's verdict for exactly these bytes of the file, this digest and quote,
    made earlier: parsing costs a hook tens of milliseconds (more on a loaded machine: the
    grammars' and verify's imports), and a teammate's uncommitted edit stays for many
    prompts. Anything unreadable is no memory."""
    import json

    try:
        with open(_memory_path(), encoding="utf-8") as fh:
            got = json.load(fh).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(got, list) and len(got) == 2 and got[0] in (HOLDS, NOT_HOLDING):
        return str(got[0]), str(got[1])
    return None


def _remember(key: str, verdict: tuple[str, str]) -> None:
    import json

    path = _memory_path()
    try:
        with open(path, encoding="utf-8") as fh:
            memory = json.load(fh)
        if not isinstance(memory, dict):
            memory = {}
    except (OSError, ValueError):
        memory = {}
    memory.pop(key, None)
    memory[key] = list(verdict)
    while len(memory) > SYMBOL_MEMORY:
        memory.pop(next(iter(memory)))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(memory, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def _judge_symbol(fact: dict, root: str, limit: int, path: str, name: str,
                  data: bytes | None) -> tuple[str, str]:
    from pathlib import Path

    from factbank_client.staleness import verify

    _grammars_importable()

    class HookRepo(verify.Repo):
        """The working tree as the hook reads it: bounded reads, and no per-run git ignore
        listing (a file git ignores is checked below, only before a fact is left out)."""

        def read(self, rel: str) -> bytes:
            return safefs.read_bytes(root, rel, limit=limit)

    try:
        v = verify.check_symbol({**fact, "id": int(fact.get("id") or 0)},
                                HookRepo(Path(root), symbol_search=SYMBOL_SEARCH,
                                         judge_only=True))
    except Exception as exc:  # a hook never fails on a check: unknown keeps the fact
        return UNKNOWN, f"{name} not checked: {_short(str(exc))}"
    if isinstance(v, verify.Skip):
        return UNKNOWN, _short(v.reason)
    if v.verdict == "stale" and data is None:  # as a line fact's missing file: unknown
        return UNKNOWN, f"{path} is not in this checkout"
    if v.verdict == "stale":
        unread = _not_evidence(root, path)
        if unread:
            return UNKNOWN, unread
        return NOT_HOLDING, _short(f"{v.reason or name + ' changed'} in this working tree")
    if v.verdict == "moved":
        return HOLDS, _short(f"{name} is now at {v.location}")
    return HOLDS, f"{name} is unchanged in {path}"


def _grammars_importable() -> None:
    """Put the interpreter's site-packages on sys.path when tree-sitter is not importable:
    the hooks run under `-S` (no `site`), and in an editable install the package's parent
    directory, which hooks.py adds, is the source tree, not site-packages. Appended, so
    nothing there shadows what the hook already loads; costs nothing when it is importable."""
    import sys

    try:
        import tree_sitter  # noqa: F401
        return
    except ImportError:
        pass
    venv = os.path.dirname(os.path.dirname(sys.executable))
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [os.path.join(venv, "lib", version, "site-packages"),
                  os.path.join(venv, "Lib", "site-packages")]
    import sysconfig

    candidates += [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    for path in candidates:
        if path and os.path.isdir(path) and path not in sys.path:
            sys.path.append(path)


FACTS_HEADER = "[factbank] Remembered facts"  # services/factbank/read/inject.py HEADER
NOTE_HEADER = (
    "[factbank] Not holding in this checkout (left out of this block: the working tree no "
    "longer has their quote; the bank is told only by a commit):"
)


def _fact_line(line: str) -> int | None:
    """The fact id of a block line (`- #12 (trust ...`), or None."""
    if not line.startswith("- #"):
        return None
    head = line[3:].split(" ", 1)[0]
    return int(head) if head.isdigit() else None


def filter_block(text: str, sources: list, root: str | Path | None,
                 limit: int = HOOK_LIMIT) -> tuple[str, list[int], list[int]]:
    """One bank's block with the facts that do not hold here left out and named:
    (text, the ids left out, the ids checked that hold or are unknown). `sources`: the
    bank's `sources` for this block (the facts quoting a file of this project). A block
    left with no fact line loses its header too; only the facts section (the bank's
    `HEADER`) is filtered, never the stale or timeline lines below it."""
    if not text or not sources or root is None:
        return text, [], []
    out: list[tuple[int, str]] = []
    kept: list[int] = []
    for fact in sources[:50]:
        try:
            fid = int(fact["id"])
            state, why = check(fact, root, limit=limit)
        except Exception:  # a malformed entry is unknown: the fact stays
            continue
        (out.append((fid, why)) if state == NOT_HOLDING else kept.append(fid))
    if not out:
        return text, [], kept
    gone = {fid for fid, _ in out}
    lines: list[str] = []
    header: int | None = None  # where the current "Remembered facts" section's header is
    facts_in_section = 0
    for ln in text.split("\n"):
        if ln.startswith("[factbank] "):
            if header is not None and not facts_in_section:
                del lines[header]  # a facts header with no fact left under it
            header = len(lines) if ln.startswith(FACTS_HEADER) else None
            facts_in_section = 0
        elif header is not None:
            if _fact_line(ln) in gone:
                continue
            facts_in_section += 1
        lines.append(ln)
    if header is not None and not facts_in_section:
        del lines[header]
    note = [NOTE_HEADER, *(f"- #{fid}: {why}" for fid, why in out)]
    return "\n".join([*lines, *note]), [f for f, _ in out], kept


def check_answers(answers: dict, root: str | Path) -> dict[str, list[int]]:
    """Each bank's `/v1/inject` answer (label -> answer) with `filter_block` applied in place
    (its `text`, and its `facts` without the ones left out): what the hooks print and what
    `factbank inject-preview` shows. Returns the ids left out, per bank."""
    left: dict[str, list[int]] = {}
    for label, answer in answers.items():
        if not isinstance(answer, dict) or not answer.get("sources"):
            continue
        text, out, _ = filter_block(str(answer.get("text") or ""), answer["sources"], root)
        if out:
            answer["text"] = text
            answer["facts"] = [f for f in answer.get("facts") or () if f not in out]
            left[label] = out
    return left
