"""The client's private attributes are its own: every other client module (the dashboard
pages, the CLI, the MCP server) calls `Client`'s documented public methods, so the wire calls
live in client.py alone and a page never builds a route by hand."""

from __future__ import annotations

import ast
from pathlib import Path

from factbank_client.client import Client

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "factbank_client"


def private_names() -> set[str]:
    """`Client`'s `_`-prefixed methods and attributes (dunders aside)."""
    tree = ast.parse((PACKAGE / "client.py").read_text("utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Client")
    names = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def reach_ins(source: str, private: set[str]) -> list[str]:
    """`x._name` for a private name of `Client`, where `x` is neither `self`/`cls` (a class
    of that module's own) nor a module the file imported (`common._json` is a function)."""
    tree = ast.parse(source)
    modules = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
               if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr in private):
            continue
        receiver = node.value
        if isinstance(receiver, ast.Name) and receiver.id in ({"self", "cls"} | modules):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_a_reach_in_and_passes_a_module_function():
    private = private_names()
    assert {"_json", "_headers", "_owner"} <= private
    assert not {"__init__", "request", "search"} & private
    source = ("from factbank_client.install import common as base\n"
              "a = dash.client._json('GET', R, '/v1/whoami', 'personal')\n"
              "b = c._headers(bank)\nd = base._json(edits, path)\ne = self._json()\n")
    assert reach_ins(source, private) == [
        "line 2: dash.client._json", "line 3: c._headers"]


def test_no_module_outside_the_client_calls_its_private_attributes():
    private = private_names()
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "client.py":
            continue
        found = reach_ins(path.read_text("utf-8"), private)
        if found:
            offenders[str(path.relative_to(PACKAGE))] = found
    assert not offenders, offenders


def test_every_public_method_says_what_it_calls():
    """Documented: each public method of the client has a docstring (the dashboard's and the
    CLI's reference)."""
    undocumented = [name for name, fn in vars(Client).items()
                    if not name.startswith("_") and callable(fn) and not fn.__doc__]
    assert undocumented == []
