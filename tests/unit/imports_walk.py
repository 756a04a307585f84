"""The project's own imports, read from the source with `ast`: nothing is imported, so no
module's import-time side effects run and a module that fails to import is still read.

Shared by the structure tests (test_layering, test_private_names). A module is named as Python
names it, through pyproject's `package-dir` (`services/factbank` is `factbank`); every import
statement counts, the ones inside functions too (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def package_dirs() -> dict[str, Path]:
    """Top-level package -> its folder, as pyproject maps them."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {pkg: ROOT / d for pkg, d in conf["tool"]["setuptools"]["package-dir"].items()}


def modules(packages: Iterable[str]) -> dict[str, Path]:
    """Every module of these top-level packages: dotted name -> file."""
    dirs = package_dirs()
    out: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted(dirs[pkg].rglob("*.py")):
            parts = [pkg, *path.relative_to(dirs[pkg]).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    line: int
    target: str  # the module imported from (a known module where one is meant)
    name: str | None  # the name taken from `target` (`from target import name`), if any
    bound: str  # the local name the statement binds
    binds_module: str | None  # the module that local name stands for, when it is one


def _resolve(source: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(source: str, path: Path, known: set[str]) -> Iterator[Import]:
    """Each import statement of one module, anywhere in it. `from pkg import mod` where
    `pkg.mod` is a known module is an import of `pkg.mod` itself (name None)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                yield Import(source, node.lineno, a.name, None, a.asname or top,
                             a.name if a.asname else top)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(source, path, node)
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in known:
                    yield Import(source, node.lineno, sub, None, a.asname or a.name, sub)
                else:
                    yield Import(source, node.lineno, target, a.name, a.asname or a.name, None)


def module_of(target: str, known: set[str]) -> str | None:
    """The known module an import names (`factbank.store.facts` for `factbank.store.facts`,
    and for `import factbank.store.facts.x`'s parent), or None when it is not ours."""
    while target:
        if target in known:
            return target
        target = target.rpartition(".")[0]
    return None
