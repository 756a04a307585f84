"""Rewrite a tree's imports and references after the module moves listed in MOVES.txt.

Run from the repository root: `python MOVES.py [--dry-run] [PATH ...]` (default: every file git
tracks plus untracked, unignored ones). Each line of MOVES.txt is one of

    old.dotted.module -> new.dotted.module        a whole module moved (or renamed)
    old.dotted.module:Name -> new.dotted.module   one name carried out of a module (a split)

What it rewrites, in .py files: `from OLD import a, b` and `import OLD`; `from PARENT import
name` where PARENT.name is a moved module (split into one import per new home, keeping the
local name with `as` when the new module's last part differs); names of a split carried to
their new module in `from OLD import ...`. In every text file (.py, .md, .toml, .yaml, .txt,
.json, .html, .sh, .ts, .js, Dockerfile...): dotted references (`OLD`, `OLD.attr`, `OLD.Name`
for a split), path forms (`services/factbank/write/redaction.py`) for whole-module moves.
Afterwards run `ruff check --select I --fix` to sort the rewritten import blocks.

What it cannot do, and only reports: `module.Name` attribute uses of a split name through its
old module (`retain.Deps` after `from factbank.write import retain`).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".json", ".html", ".sh",
                 ".ts", ".js", ".cfg", ".ini", ".example", ".hujson"}
SKIP = {"MOVES.txt", "MOVES.py"}


def load_moves(path: Path) -> list[tuple[dict[str, str], dict[tuple[str, str], str]]]:
    """One (modules, names) pair a line, in the file's order: a later line may move what an
    earlier one made, so each is applied to the tree as the ones before it left it."""
    steps = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        old, new = (s.strip() for s in line.split("->"))
        if ":" in old:
            mod, name = old.split(":")
            steps.append(({}, {(mod, name): new}))
        else:
            steps.append(({old: new}, {}))
    return steps


def package_dirs() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["tool"]["setuptools"]["package-dir"]


def to_path(module: str, dirs: dict[str, str], is_pkg: bool) -> str | None:
    top, _, rest = module.partition(".")
    if top not in dirs:
        return None
    base = dirs[top] + ("/" + rest.replace(".", "/") if rest else "")
    return base if is_pkg else base + ".py"


IMPORT_FROM = re.compile(
    r"^(?P<indent>[ \t]*)from[ \t]+(?P<mod>[\w.]+)[ \t]+import[ \t]+"
    r"(?P<names>\((?:[^()#]|#[^\n]*)*\)|[^\n#(]*?)(?P<comment>[ \t]*#[^\n]*)?$",
    re.MULTILINE,
)


def parse_names(text: str) -> list[tuple[str, str | None]]:
    text = re.sub(r"#[^\n]*", "", text).strip().strip("()")
    out = []
    for part in text.replace("\\\n", " ").split(","):
        part = part.strip()
        if not part:
            continue
        bits = part.split()
        out.append((bits[0], bits[2] if len(bits) == 3 and bits[1] == "as" else None))
    return out


def fmt(indent: str, mod: str, names: list[tuple[str, str | None]], comment: str) -> str:
    body = ", ".join(n if a is None else f"{n} as {a}" for n, a in names)
    line = f"{indent}from {mod} import {body}"
    if len(line) > 99 and len(names) > 1:
        inner = "".join(f"{indent}    {n if a is None else f'{n} as {a}'},\n" for n, a in names)
        line = f"{indent}from {mod} import (\n{inner}{indent})"
    return line + (comment or "")


def rewrite_from(m: re.Match, modules: dict[str, str],
                 names: dict[tuple[str, str], str]) -> str:
    indent, mod, comment = m["indent"], m["mod"], m["comment"] or ""
    listed = parse_names(m["names"])
    groups: dict[str, list[tuple[str, str | None]]] = {}
    target = modules.get(mod, mod)
    for name, alias in listed:
        full = f"{mod}.{name}"
        if full in modules:  # `from PARENT import module`
            new = modules[full]
            parent, _, last = new.rpartition(".")
            alias = alias or name
            groups.setdefault(parent, []).append((last, alias if alias != last else None))
        elif (mod, name) in names:
            groups.setdefault(names[(mod, name)], []).append((name, alias))
        else:
            groups.setdefault(target, []).append((name, alias))
    if list(groups) == [mod]:
        return m.group(0)  # nothing of it moved: left as written, comments and all
    lines = [fmt(indent, g, ns, comment if i == 0 else "") for i, (g, ns) in
             enumerate(groups.items())]
    return "\n".join(lines)


def inline(text: str, modules: dict[str, str]) -> str:
    """`from PARENT import module` inside a line (a `python -c` string, a Dockerfile RUN)."""
    for old, new in modules.items():
        parent, _, name = old.rpartition(".")
        nparent, _, nlast = new.rpartition(".")
        alias = f" as {name}" if nlast != name else ""
        text = re.sub(rf"(?<![\w.])from {re.escape(parent)} import {re.escape(name)}(?![\w,])",
                      f"from {nparent} import {nlast}{alias}", text)
    return text


def dotted(text: str, modules: dict[str, str], names: dict[tuple[str, str], str]) -> str:
    for (mod, name), new in sorted(names.items(), key=lambda kv: -len(kv[0][0])):
        text = re.sub(rf"(?<![\w.]){re.escape(mod)}\.{re.escape(name)}(?!\w)", f"{new}.{name}",
                      text)
    for old in sorted(modules, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", modules[old], text)
    return text


def paths(text: str, modules: dict[str, str], dirs: dict[str, str]) -> str:
    for old in sorted(modules, key=len, reverse=True):
        new = modules[old]
        new_is_pkg = (ROOT / (to_path(new, dirs, True) or "-")).is_dir()
        for is_pkg in (False, True):
            a, b = to_path(old, dirs, is_pkg), to_path(new, dirs, new_is_pkg and is_pkg)
            if a and b:
                text = re.sub(rf"(?<![\w/]){re.escape(a)}(?![\w])", b, text)
        # the short form from the package's name: `factbank_client/schema.py`
        a = old.replace(".", "/") + ".py"
        b = new.replace(".", "/") + ".py"
        text = re.sub(rf"(?<![\w/]){re.escape(a)}(?![\w])", b, text)
    return text


def files(args: list[str]) -> list[Path]:
    if args:
        return [Path(a) for a in args]
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / p for p in out if not p.startswith(".venv/")]


def main(argv: list[str]) -> int:
    dry = "--dry-run" in argv
    args = [a for a in argv if a != "--dry-run"]
    steps = load_moves(ROOT / "MOVES.txt")
    dirs = package_dirs()
    changed = 0
    for path in files(args):
        if path.name in SKIP or not path.is_file():
            continue
        if path.suffix not in TEXT_SUFFIXES and path.name != "Dockerfile":
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = text
        for modules, names in steps:
            new = dotted(new, modules, names)  # first: what it writes is never read again
            new = paths(new, modules, dirs)
            if path.suffix == ".py":
                new = IMPORT_FROM.sub(lambda m, mo=modules, na=names: rewrite_from(m, mo, na),
                                      new)
            new = inline(new, modules)
            if path.suffix != ".py":
                continue
            for (mod, name), home in names.items():
                last = mod.rpartition(".")[2]
                for hit in re.finditer(rf"(?<![\w.]){re.escape(last)}\.{re.escape(name)}\b", new):
                    line = new.count("\n", 0, hit.start()) + 1
                    print(f"{path}:{line}: {last}.{name} now lives in {home}", file=sys.stderr)
        if new != text:
            changed += 1
            print(path.relative_to(ROOT) if path.is_absolute() else path)
            if not dry:
                path.write_text(new)
    print(f"{changed} file(s) {'would change' if dry else 'changed'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
