"""The client's settings: one declaration per `FACTBANK_*` variable, read through
`factbank_client.settings` only, at call time, with the docs table generated from it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from factbank_client import settings as settings_mod
from factbank_client.settings import ClientSettings, declared, settings
from tests.unit.generated_tables import assert_current

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "factbank_client"


def _names_factbank(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The `FACTBANK_*` variable an expression names: a literal, an f-string starting with
    the prefix, or a module-level constant holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        value = node.value
    elif isinstance(node, ast.JoinedStr) and node.values and \
            isinstance(node.values[0], ast.Constant):
        value = str(node.values[0].value)
    elif isinstance(node, ast.Name):
        value = constants.get(node.id, "")
    else:
        return None
    return value if value.startswith("FACTBANK_") else None


def direct_reads(source: str) -> list[str]:
    """Where a module reads a `FACTBANK_*` variable itself: `.get(NAME)`, `getenv(NAME)`,
    `[NAME]` or `NAME in ...` on any mapping (the environment or a copy of it)."""
    tree = ast.parse(source)
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                 for t in n.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        keys: list[ast.expr] = []
        called = node.func.attr if isinstance(node, ast.Call) and isinstance(
            node.func, ast.Attribute) else getattr(getattr(node, "func", None), "id", None)
        if isinstance(node, ast.Call) and node.args and called in ("get", "getenv", "pop"):
            keys = [node.args[0]]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            keys = [node.slice]
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn))
                                                   for op in node.ops):
            keys = [node.left]
        for key in keys:
            name = _names_factbank(key, constants)
            if name:
                found.append(f"line {node.lineno}: {name}")
    return found


def test_the_scan_finds_each_way_of_reading_the_environment():
    source = ('import os\nENV = "FACTBANK_SESSION_ID"\n'
              'a = os.environ.get("FACTBANK_TOKEN")\nb = os.getenv("FACTBANK_URL", "")\n'
              'c = os.environ["FACTBANK_AGENT"]\nd = os.environ.get(ENV)\n'
              'e = os.environ.get(f"FACTBANK_DISPATCH_{x}")\nf = "FACTBANK_VERIFY" in os.environ\n'
              'g = os.environ.get("HOME")\nenv = {**os.environ, "FACTBANK_DISPATCH_RUN": "r"}\n')
    assert [r.split(": ")[1] for r in direct_reads(source)] == [
        "FACTBANK_TOKEN", "FACTBANK_URL", "FACTBANK_AGENT", "FACTBANK_SESSION_ID",
        "FACTBANK_DISPATCH_", "FACTBANK_VERIFY"]


def test_no_client_module_reads_a_factbank_variable_itself():
    """Every read goes through the settings object, so the table below is complete."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "settings.py":
            continue
        found = direct_reads(path.read_text("utf-8"))
        if found:
            offenders[str(path.relative_to(PACKAGE))] = found
    assert not offenders, offenders


def test_the_pi_extension_and_the_git_hooks_read_only_declared_variables():
    """The TypeScript extension and the shell scripts `install git` writes cannot import the
    settings; the names they read must still be declared (and so be in the table)."""
    names = {v.name for v in declared()}
    ts = (PACKAGE / "assets" / "pi" / "factbank.ts").read_text("utf-8")
    shell = (PACKAGE / "install" / "git.py").read_text("utf-8")
    read = set(re.findall(r"env\.(FACTBANK_\w+)", ts)) | set(
        re.findall(r"\$\{\{?(FACTBANK_\w+)", shell))
    assert {"FACTBANK_HOOK_TIMEOUT", "FACTBANK_PRE_PUSH", "FACTBANK_VERIFY"} <= read
    assert read - names == set()
    pi = {v.name for v in declared() if "Pi extension" in v.used_by}
    git = {v.name for v in declared() if "git" in v.used_by}
    assert pi == set(re.findall(r"env\.(FACTBANK_\w+)", ts))  # the table says who reads what
    assert git == set(re.findall(r"\$\{\{?(FACTBANK_\w+)", shell))


def test_codex_passes_every_connection_variable_to_its_mcp_server():
    """Codex passes its MCP server the variables `env_vars` names (install/harnesses.py)."""
    from factbank_client.install import common

    connection = {v.name for v in declared() if v.used_by.startswith(settings_mod.CONNECTION)}
    assert set(common.CODEX_ENV_VARS) == connection and "FACTBANK_TOKEN" in connection


def test_each_variable_is_declared_once_with_its_meaning_and_readers():
    variables = list(declared())
    assert len({v.name for v in variables}) == len(variables) >= 17
    for v in variables:
        assert v.name.startswith("FACTBANK_") and v.doc.endswith((".", ")")) and v.used_by, v.name


def test_the_docs_table_is_current():
    """docs/cli.md shows `python -m factbank_client.settings`' output between the markers;
    after changing a declaration, paste that output there."""
    assert_current("docs/cli.md", "client-settings", "factbank_client.settings",
                   settings_mod.table)


def test_values_are_read_when_asked_for(monkeypatch):
    for name in ("FACTBANK_AGENT", "FACTBANK_HOOK_TIMEOUT", "FACTBANK_VERIFY",
                 "FACTBANK_DISPATCH_CLAUDE"):
        monkeypatch.delenv(name, raising=False)
    assert settings.agent == "cli" and settings.hook_timeout == 0.9 and settings.verify
    assert settings.dispatch_bin("claude") == ""
    monkeypatch.setenv("FACTBANK_AGENT", "codex")
    monkeypatch.setenv("FACTBANK_HOOK_TIMEOUT", "2.5")
    monkeypatch.setenv("FACTBANK_VERIFY", "0")
    monkeypatch.setenv("FACTBANK_DISPATCH_CLAUDE", "/opt/claude")
    assert settings.agent == "codex" and settings.hook_timeout == 2.5 and not settings.verify
    assert settings.dispatch_bin("claude") == "/opt/claude"


@pytest.mark.parametrize(("raw", "seconds"), [("", 0.9), ("soon", 0.9), ("0", 0.05),
                                              ("-3", 0.05), ("1.5", 1.5)])
def test_a_hook_timeout_that_does_not_parse_is_the_default(raw, seconds):
    assert ClientSettings({"FACTBANK_HOOK_TIMEOUT": raw}).hook_timeout == seconds


@pytest.mark.parametrize(("raw", "on"), [("", True), ("1", True), ("yes", True), ("0", False)])
def test_a_flag_is_off_only_at_zero(raw, on):
    """As the shell scripts and the Pi extension test it (`!= "0"`)."""
    assert ClientSettings({"FACTBANK_INJECT_CHECK": raw}).inject_check is on


def test_an_empty_variable_is_unset():
    assert ClientSettings({"FACTBANK_AGENT": "", "FACTBANK_LOG_LEVEL": ""}).agent == "cli"
    assert ClientSettings({"FACTBANK_LOG_LEVEL": ""}).log_level == "WARNING"


def test_importing_the_settings_loads_nothing_else():
    """The prompt hook imports it on every prompt: under the hooks' `-I -S` it must add only
    itself and its package (no typing, dataclasses or enum) to the `os` every hook imports."""
    code = (f"import os, sys; sys.path.insert(0, {str(PACKAGE.parent)!r}); "
            "before = set(sys.modules); import factbank_client.settings; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["factbank_client", "factbank_client.settings"]
