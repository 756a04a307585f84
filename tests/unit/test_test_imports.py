"""Tests take what they share from helper modules and conftest files, never from another test
module: importing a `test_*` module runs its module-level code and drags its fixtures and
tests into the importer's namespace (pytest then collects them twice, or a fixture shadows
another unseen), and the helper sits where no reader of the helpers looks for it.

A scan with `ast` of every module under tests/ for `from tests.x.test_y import ...`,
`from .test_y import ...`, `from tests.x import test_y` and `import tests.x.test_y`.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def imports_of_test_modules(source: str) -> list[str]:
    """The imports in `source` that name a test module, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if _is_test_module(module) or any(_is_test_module(a.name) for a in node.names):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Import):
            found += [ast.unparse(node) for a in node.names if _is_test_module(a.name)]
    return found


def test_the_scan_finds_every_form() -> None:
    sample = ("from tests.integration.test_mcp import call\nfrom .test_e2e import Services\n"
              "from tests.integration import test_cli\nimport tests.unit.test_hooks\n"
              "from tests.integration.cli_env import env\nfrom . import e2e\n"
              "from .fake_model import FakeModel\nimport pytest\n")
    assert imports_of_test_modules(sample) == [
        "from tests.integration.test_mcp import call", "from .test_e2e import Services",
        "from tests.integration import test_cli", "import tests.unit.test_hooks"]


def test_no_imports_of_test_modules_another_test_module() -> None:
    offenders = {str(path.relative_to(TESTS.parent)): found
                 for path in sorted(TESTS.rglob("*.py"))
                 if (found := imports_of_test_modules(path.read_text("utf-8")))}
    assert not offenders, (
        "move what these share into a helper module or a conftest fixture:\n"
        + "\n".join(f"{p}: {imp}" for p, found in offenders.items() for imp in found))
