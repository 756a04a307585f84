"""No module takes another module's private name: an underscore name is its module's own, so a
step another module runs is public (retain's `gated`, `near_duplicates`, `retired_match`,
which check and lifecycle call), never reached into.

Read from the source of services/ and clients/ with `ast` (tests/unit/imports_walk.py): both
`from m import _name` and `m._name` on a module `m` that an import bound. Attributes of objects
(`self._x`, a parser's `_actions`) and of other projects' modules are not this rule's business.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.imports_walk import ROOT, Import, imports, modules

PACKAGES = ("factbank", "factbank_ingest", "factbank_recall", "factbank_worker",
            "factbank_common", "factbank_client")


def private(name: str | None) -> bool:
    return bool(name) and name.startswith("_") and not name.startswith("__")


def violations(source: str, path: Path, known: set[str]) -> list[str]:
    """Where `source` takes a private name of another of our modules."""
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    aliases: dict[str, str] = {}  # local name -> our module it stands for
    for imp in imports(source, path, known):
        if imp.binds_module is not None:
            if imp.binds_module in known:
                aliases[imp.bound] = imp.binds_module
        elif private(imp.name) and imp.target in known and imp.target != source:
            found.append(f"{where}:{imp.line}: from {imp.target} import {imp.name}")
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in aliases
                and aliases[node.value.id] != source):
            found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr} "
                         f"({aliases[node.value.id]})")
    return found


def test_no_module_takes_another_modules_private_name():
    known = modules(PACKAGES)
    found = [v for name, path in known.items() for v in violations(name, path, set(known))]
    assert found == [], "private names taken across modules:\n" + "\n".join(found)


def test_the_rule_sees_both_forms(tmp_path):
    """The check itself: a planted `from m import _x` and `m._y` are both found, a public name
    and an object's private attribute are not."""
    path = tmp_path / "planted.py"
    path.write_text(
        "from factbank.store import facts\n"
        "from factbank.store.facts import _hidden, get_fact\n"
        "def f(obj):\n"
        "    return facts._row, obj._cache, get_fact\n"
    )
    known = {"factbank", "factbank.store", "factbank.store.facts", "planted"}
    found = violations("planted", path, known)
    assert found == ["planted.py:2: from factbank.store.facts import _hidden",
                     "planted.py:4: facts._row (factbank.store.facts)"]


def test_imports_are_resolved_as_python_names_them():
    """`from factbank.write import retain` is an import of the module factbank.write.retain;
    `from factbank.write.retain import Outcome` of a name in it."""
    known = modules(["factbank"])
    got = {(i.target, i.name) for i in imports("factbank.write.queue",
                                              known["factbank.write.queue"], set(known))}
    assert ("factbank.write.retain", None) in got
    assert ("factbank.write.retain", "Outcome") in got
    assert all(isinstance(i, Import) for i in imports("factbank.models", known["factbank.models"],
                                                     set(known)))
