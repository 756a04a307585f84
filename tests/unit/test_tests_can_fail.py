"""Tests that cannot fail: a scan of every test module under tests/ with `ast`.

The reviewers found three that passed whatever the code did: an assertion ending in
`or True` (test_recall), `tokenize(text) == tokenize(text)` (test_tokenizer), and a compose
test whose only outcomes were a skip or a pass. This finds the class, statically:

* an `assert` that is always true: a truthy constant (`assert True`, `assert "msg"`), a
  non-empty literal (`assert (x, "why")`, `assert [x]`), `or` with such an operand
  (`... or True`), a comparison of an expression with itself (`==`, `is`, `<=`, `>=`);
* a test function in which no path checks anything: no `assert`, no `raise`, no
  `pytest.raises/fail/warns`, no `assert_*` call, and no call to a helper that does one of
  these (helpers are followed through the module itself, the conftest files and `tests.*`
  modules it imports from). Such a test either skips or passes.

A test that only checks that a call does not raise says so by asserting on what it returns.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
REFLEXIVE = (ast.Eq, ast.Is, ast.LtE, ast.GtE)
CHECK_CALLS = {"raises", "fail", "warns", "deprecated_call", "xfail"}


def always_true(test: ast.expr) -> str | None:
    """Why `assert test` can never fail, or None."""
    if isinstance(test, ast.Constant):
        return "asserts a truthy constant" if test.value else None
    if isinstance(test, (ast.Tuple, ast.List, ast.Set)) and test.elts:
        return "asserts a non-empty literal (a tuple is always true)"
    if isinstance(test, ast.Dict) and test.keys:
        return "asserts a non-empty literal"
    if isinstance(test, ast.JoinedStr) and any(
            isinstance(v, ast.Constant) and v.value for v in test.values):
        return "asserts a non-empty f-string"
    if isinstance(test, ast.BoolOp):
        whys = [always_true(v) for v in test.values]
        if isinstance(test.op, ast.Or) and any(whys):
            return "`or` with an operand that is always true"
        if isinstance(test.op, ast.And) and all(whys):
            return "every operand of `and` is always true"
    if isinstance(test, ast.Compare):
        operands = [test.left, *test.comparators]
        for op, a, b in zip(test.ops, operands, operands[1:], strict=False):
            if isinstance(op, REFLEXIVE) and ast.dump(a) == ast.dump(b):
                return f"compares {ast.unparse(a)} with itself"
    return None


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


class Module:
    """One parsed test module, its functions by name, and the helpers it imports."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text("utf-8"), str(path))
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
        self.imported: dict[str, tuple[Path, str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
                target = ROOT.joinpath(*node.module.split("."))
                file = target.with_suffix(".py") if target.with_suffix(".py").is_file() \
                    else target / "__init__.py"
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (file, alias.name)


class Scanner:
    def __init__(self) -> None:
        self.modules: dict[Path, Module] = {}
        self.memo: dict[tuple[Path, str], bool] = {}

    def module(self, path: Path) -> Module | None:
        if path not in self.modules:
            if not path.is_file():
                return None
            self.modules[path] = Module(path)
        return self.modules[path]

    def conftests(self, path: Path) -> Iterator[Module]:
        for folder in path.parents:
            m = self.module(folder / "conftest.py")
            if m is not None:
                yield m
            if folder == TESTS:
                return

    def resolve(self, mod: Module, name: str) -> tuple[Module, ast.AST] | None:
        if name in mod.functions:
            return mod, mod.functions[name]
        if name in mod.imported:
            file, real = mod.imported[name]
            other = self.module(file)
            if other is not None and real in other.functions:
                return other, other.functions[real]
        for conf in self.conftests(mod.path):
            if name in conf.functions:
                return conf, conf.functions[name]
        return None

    def checks(self, mod: Module, fn: ast.AST) -> bool:
        """Whether some path through `fn` (or a helper it calls) can fail the test."""
        key = (mod.path, f"{getattr(fn, 'name', '')}:{getattr(fn, 'lineno', 0)}")
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = False  # recursion guard
        found = False
        for node in ast.walk(fn):
            if isinstance(node, ast.Assert) and always_true(node.test) is None:
                found = True
            elif isinstance(node, ast.Raise):
                found = True
            elif isinstance(node, ast.Call):
                name = _name(node.func)
                if name in CHECK_CALLS or name.startswith(("assert", "check_")):
                    found = True
                elif name and name != getattr(fn, "name", None):
                    target = self.resolve(mod, name)
                    found = target is not None and self.checks(*target)
            if found:
                break
        self.memo[key] = found
        return found


def all_test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if ".venv" not in p.parts)


def _tests(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.name.startswith("test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (n for n in node.body if isinstance(n, (ast.FunctionDef,
                        ast.AsyncFunctionDef)) and n.name.startswith("test"))


def findings(paths: list[Path]) -> list[str]:
    scanner = Scanner()
    out: list[str] = []
    for path in paths:
        mod = scanner.module(path)
        assert mod is not None
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Assert):
                why = always_true(node.test)
                if why:
                    out.append(f"{where}:{node.lineno}: assert always true: {why}")
        for test in _tests(mod.tree):
            if not scanner.checks(mod, test):
                out.append(f"{where}:{test.lineno}: {test.name} checks nothing: "
                           "every path skips or passes")
    return out


def test_no_test_under_tests_is_unable_to_fail():
    found = findings(all_test_modules())
    assert not found, "tests that cannot fail:\n" + "\n".join(found)


HOSTILE = {
    "or_true": "def test_a(r):\n    assert r.status == 200 or True\n",
    "self_compare": "def test_a(tok):\n    assert tok('x') == tok('x')\n",
    "chained_self": "def test_a(t, s):\n    assert t(s) == t(s) == t(str(s))\n",
    "assert_true": "def test_a():\n    assert True\n",
    "tuple": "def test_a(x):\n    assert (x == 1, 'x is one')\n",
    "fstring": "def test_a(x):\n    assert f'{x} ok'\n",
    "list": "def test_a(x):\n    assert [x]\n",
    "skip_or_pass": ("import pytest\ndef test_a(ok):\n    if not ok:\n"
                     "        pytest.skip('no engine')\n    print('ran')\n"),
    "helper_without_check": ("def run(x):\n    return x\n"
                             "def test_a():\n    run(1)\n"),
    "in_a_class": "class TestA:\n    def test_a(self):\n        pass\n",
}
FINE = {
    "assert": "def test_a(x):\n    assert x == 1\n",
    "helper_asserts": "def ok(x):\n    assert x\ndef test_a():\n    ok(1)\n",
    "raises": ("import pytest\ndef test_a():\n    with pytest.raises(ValueError):\n"
               "        int('x')\n"),
    "skip_then_assert": ("import pytest\ndef test_a(ok):\n    if not ok:\n"
                         "        pytest.skip('no')\n    assert ok\n"),
    "mock_assert": "def test_a(m):\n    m.assert_called_once_with(1)\n",
    "assert_false": "def test_a():\n    assert False, 'never here'\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_scan_finds_each_kind(name, tmp_path):
    path = tmp_path / f"test_{name}.py"
    path.write_text(HOSTILE[name], "utf-8")
    assert findings([path]), name


@pytest.mark.parametrize("name", sorted(FINE))
def test_the_scan_passes_tests_that_can_fail(name, tmp_path):
    path = tmp_path / f"test_{name}.py"
    path.write_text(FINE[name], "utf-8")
    assert findings([path]) == [], name
