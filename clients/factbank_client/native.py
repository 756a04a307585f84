"""`factbank migrate-native claude|codex|pi`: a harness's own memories for this project as
candidate facts.

What each harness keeps (the files read, in this order; those that do not exist are skipped):

* claude: the repository's `CLAUDE.md`, `CLAUDE.local.md`, `.claude/CLAUDE.md`, and Claude
  Code's project memory, `<CLAUDE_CONFIG_DIR or ~/.claude>/projects/<root with every
  non-alphanumeric character as "-">/memory/*.md` (its auto-memory files, front matter skipped);
* codex: the repository's `AGENTS.md` and `AGENTS.override.md` (Codex's project memory is its
  AGENTS.md chain);
* pi: the repository's `AGENTS.md` and `CLAUDE.md` (Pi reads both from the project).

Each line is a memory (a claim: "The staging API listens on 8443") or a rule (an instruction:
"Use pnpm", "Never push to main", "不要直接推 main"). Rules stay rules: they are listed and left
alone. Headings, code blocks, tables, front matter, factbank's own instruction block and lines
of fewer than three words are neither. A memory becomes a candidate: content and quote are the
line's text (its list marker dropped, so the quote stays verbatim), source = `file path:line`
(with a fingerprint, like any file fact, so `verify` follows it).

Nothing is saved until accepted: the candidates go to the server's check route (write gate,
redaction, the duplicate-vs-correction decision; it writes nothing), then only those the user
accepts (`--accept-all`, or y/n at a terminal) are added. A claim already in the bank answers
`same_claim` and is not proposed again, so a second run saves nothing: idempotent. The files
are backed up before anything else (except with `--dry-run`, which writes nothing), into
`<data dir>/native-backup/<harness>-<digest of the files>/`: the same files back up once.

Each file is read once, through `safefs.read`: a repository file only from inside
the repository (a `CLAUDE.md -> /some/private/file` link is refused and listed under
"refused", never read, not even with `--dry-run`), a Claude memory file only from inside its
memory folder. The backup holds those same bytes (never a second read through a link).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factbank_client import safefs
from factbank_client.client import new_fact
from factbank_client.errors import FactbankError, MigrateError, UnsafePath
from factbank_client.project import repo_root

REPO_FILES = {
    "claude": ("CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md"),
    "codex": ("AGENTS.md", "AGENTS.override.md"),
    "pi": ("AGENTS.md", "CLAUDE.md"),
}
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
IMPERATIVE = frozenset(
    "use run always never do don't dont prefer avoid keep write add make ensure put call check "
    "follow remember try be test commit push install read ask update create delete remove set "
    "don’t please".split())
_MODAL = re.compile(r"\b(must|should|do not|don't|make sure|is required to)\b", re.I)
_ZH_RULE = re.compile(r"^(请|不要|别|必须|务必|禁止|总是|永远|应该|一定要)|必须|不要|禁止|务必")
BLOCK_BEGIN = "<!-- factbank:begin"
BLOCK_END = "<!-- factbank:end"


def claude_memory_dir(root: Path, env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else \
        Path(env.get("HOME") or Path.home()) / ".claude"
    return base / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(root.resolve())) / "memory"


@dataclass
class Source:
    """One memory file as read: the path shown, its real path, its bytes, and whether it is
    in the repository (else in Claude's memory folder)."""

    path: Path
    real: Path
    data: bytes
    in_repo: bool


def scan(harness: str, root: Path) -> tuple[list[Source], list[dict]]:
    """The harness's memory files for the repository at `root` that exist, read (each at most
    once, by real path), and those refused ({"file", "reason"}: a link out of its folder...)."""
    found = [(root / name, root) for name in REPO_FILES[harness]]
    if harness == "claude":
        mem = claude_memory_dir(root)
        if mem.is_dir():
            found.extend((p, mem) for p in sorted(mem.glob("*.md")))
    out: list[Source] = []
    refused: list[dict] = []
    for path, top in found:
        if not os.path.lexists(path):
            continue
        try:
            real, data = safefs.read(top, path)
        except FileNotFoundError:
            continue
        except (UnsafePath, OSError) as exc:
            refused.append({"file": str(path), "reason": str(exc)})
            continue
        if real not in {s.real for s in out}:
            out.append(Source(path, real, data, top == root))
    return out, refused


def sources(harness: str, root: Path) -> list[Path]:
    """The harness's memory files for the repository at `root` that exist and may be read."""
    return [s.path for s in scan(harness, root)[0]]


def is_rule(text: str) -> bool:
    """An instruction (left alone), not a claim."""
    first = text.split(maxsplit=1)[0].lower().strip("*_`:,.!") if text.split() else ""
    return first in IMPERATIVE or bool(_MODAL.search(text)) or bool(_ZH_RULE.search(text))


def _substantial(text: str) -> bool:
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return len(text.split()) >= 3 or cjk >= 6


def classify(text: str) -> list[tuple[int, str, str]]:
    """(line number, kind "fact"|"rule", the line's text without its list marker) for each
    line that is a memory or a rule."""
    out: list[tuple[int, str, str]] = []
    lines = text.splitlines()
    fence = block = False
    front = bool(lines) and lines[0].strip() == "---"
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if front:
            if n > 1 and line == "---":
                front = False
            continue
        if line.startswith(BLOCK_BEGIN):
            block = True
        if block:
            block = not line.startswith(BLOCK_END)
            continue
        if line.startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence or not line or line.startswith(("#", "|", "<!--", ">", "---")):
            continue
        body = _BULLET.sub("", raw).strip()
        if not body or not _substantial(body):
            continue
        out.append((n, "rule" if is_rule(body) else "fact", body))
    return out


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def data_dir() -> Path:
    """$XDG_DATA_HOME/factbank, else ~/.local/share/factbank (the client's durable data)."""
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "factbank"


def backup(harness: str, files: list[Source], root: Path) -> Path:
    """Copy the bytes read under <data dir>/native-backup/<harness>-<digest>/ (once per
    content), through a fresh temp folder (mkdtemp: no planted name is followed) renamed into
    place."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.path).encode() + b"\0" + f.data + b"\0")
    dest = data_dir() / "native-backup" / f"{harness}-{digest.hexdigest()[:16]}"
    if dest.is_symlink():
        raise MigrateError(f"{dest} is a symbolic link: not written through; remove it")
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    for f in files:
        if f.in_repo:
            target = tmp / "repo" / f.real.relative_to(root.resolve())
        else:
            target = tmp / "home" / f.real.relative_to(f.real.anchor)
        safefs.write(target, f.data, mode=0o600)
    os.rename(tmp, dest)
    return dest


def ask_tty(candidate: dict) -> bool:
    answer = input(f"save {candidate['where']}: {candidate['quote'][:100]}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def migrate(client: Any, harness: str, cwd: Path, *, project: str | None,
            category: str = "project", dry_run: bool = False, accept_all: bool = False,
            bank: str | None = None, ask: Callable[[dict], bool] | None = None) -> dict:
    """The plan `render.migrate_lines` shows (and `--json` prints), after saving what was
    accepted."""
    root = repo_root(cwd)
    if root is None:
        raise MigrateError("migrate-native reads a project's memories: run it in its repository")
    files, refused = scan(harness, root)
    plan: dict[str, Any] = {"harness": harness, "project": project, "files": len(files),
                            "read": [str(f.path) for f in files], "refused": refused,
                            "backup": None, "candidates": [], "rules": []}
    facts: list[dict] = []
    seen: set[str] = set()
    for src in files:
        f, in_repo = src.path, src.in_repo
        text = src.data.decode("utf-8", errors="replace")
        shown = src.real.relative_to(root.resolve()).as_posix() if in_repo else str(f)
        for n, kind, body in classify(text):
            where = f"{shown}:{n}"
            if kind == "rule":
                plan["rules"].append({"where": where, "line": body})
                continue
            if _key(body) in seen:
                continue
            seen.add(_key(body))
            try:
                # A memory file is outside the repository: its quote is the line just read
                # (no second read, no fingerprint: verify cannot judge it anyway).
                fact = new_fact(body, category, "file", f"{f}:{n}", body,
                                tags=[harness, "native memory", "原生记忆"],
                                origin="user" if in_repo else "inferred", project=project,
                                cwd=root, check_files=in_repo)
            except FactbankError as exc:  # cannot happen for a line read just now
                plan["rules"].append({"where": where, "line": f"(skipped: {exc})"})
                continue
            facts.append(fact)
            plan["candidates"].append({"where": where, "quote": body, "fact": fact,
                                       "check": None, "saved": None})
    if not dry_run and files:
        plan["backup"] = str(backup(harness, files, root))
    if facts:
        for cand, verdict in zip(plan["candidates"], client.check(facts, bank=bank),
                                 strict=True):
            cand["check"] = verdict
    for cand in plan["candidates"]:  # a line holding a secret is never echoed back
        if (cand["check"] or {}).get("redacted"):
            kinds = sorted({str(r.get("kind")) for r in cand["check"]["redacted"]})
            cand["quote"] = f"(not shown: it holds a {', '.join(kinds)}; saved redacted)"
    if not dry_run:
        for cand in plan["candidates"]:
            if (cand["check"] or {}).get("verdict") != "new":
                continue
            if accept_all or (ask is not None and ask(cand)):
                outcome = client.add(cand["fact"], bank=bank)
                cand["saved"] = int(outcome["fact"]["id"])
        if not accept_all and ask is None and any(
                (c["check"] or {}).get("verdict") == "new" for c in plan["candidates"]):
            print("factbank: nothing saved: run again with --accept-all, or at a terminal to "
                  "accept them one by one", file=sys.stderr)
    for cand in plan["candidates"]:
        del cand["fact"]  # the body sent; the plan shows where, the quote and the verdict
    return plan
