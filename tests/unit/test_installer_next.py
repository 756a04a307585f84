"""`factbank install gemini|qwen|opencode|copilot`: the installer's promises on each harness's
own files, on a corpus of real-looking user configs
(tests/fixtures/harness-config-corpus/<harness>/): idempotent, the dry run's diff is what is
written, uninstall gives back every byte (CRLF, tabs, minified, escapes, the user's own hooks
and MCP servers), and `install all` touches only the harnesses that are present.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factbank_client.errors import InstallError
from factbank_client.install import common
from factbank_client.install import copilot as installer_copilot
from factbank_client.install import harnesses as installer
from factbank_client.install import opencode as installer_opencode

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "harness-config-corpus"
NEXT = ("gemini", "qwen", "opencode", "copilot")
COPILOT_MCP = ('{\n  "mcpServers": {\n    "playwright": {"type": "local", "command": "npx", '
               '"args": ["@playwright/mcp@latest"], "tools": ["*"]}\n  }\n}\n')
USER_NOTES = "# My notes\n\nAlways answer in English.\n"


def config_file(home: Path, harness: str) -> Path:
    return {"gemini": home / ".gemini" / "settings.json",
            "qwen": home / ".qwen" / "settings.json",
            "opencode": home / ".config" / "opencode" / "opencode.json",
            "copilot": home / ".copilot" / "settings.json"}[harness]


def instruction_file(home: Path, harness: str) -> Path:
    return {"gemini": home / ".gemini" / "GEMINI.md", "qwen": home / ".qwen" / "QWEN.md",
            "opencode": home / ".config" / "opencode" / "AGENTS.md",
            "copilot": home / ".copilot" / "copilot-instructions.md"}[harness]


def paths_for(home: Path) -> common.Paths:
    return common.Paths.from_env({"HOME": str(home)})


def snapshot(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and ".config/factbank" not in str(p)}


CASES = [(h, f) for h in NEXT for f in sorted((CORPUS / h).glob("*.json"))]


@pytest.mark.parametrize(("harness", "corpus_file"), CASES,
                         ids=[f"{h}-{f.stem}" for h, f in CASES])
def test_install_is_idempotent_and_uninstall_gives_back_every_byte(
        tmp_path: Path, harness: str, corpus_file: Path) -> None:
    home = tmp_path / "home"
    target = config_file(home, harness)
    target.parent.mkdir(parents=True)
    target.write_bytes(corpus_file.read_bytes())
    instruction_file(home, harness).write_text(USER_NOTES)
    if harness == "copilot":
        (home / ".copilot" / "mcp-config.json").write_text(COPILOT_MCP)
    before = snapshot(home)
    paths = paths_for(home)

    plan = installer.plan_install([harness], paths)
    assert snapshot(home) == before, "planning (the dry run) wrote something"
    installer.apply(plan)
    after = snapshot(home)
    for c in plan.changes:  # the dry run's diff is exactly what was written
        assert c.new is not None and Path(c.path).read_text() == c.new
    assert after[str(target.relative_to(home))] != before[str(target.relative_to(home))]
    data = json.loads(target.read_text())
    user = json.loads(corpus_file.read_text())
    for key, value in user.items():  # the user's settings are all still there
        if key not in ("hooks", "mcpServers", "mcp"):
            assert data[key] == value
    assert "factbank:begin" in instruction_file(home, harness).read_text()
    assert instruction_file(home, harness).read_text().startswith(USER_NOTES)

    assert installer.plan_install([harness], paths).empty, "a re-install changed something"
    installer.apply(installer.plan_uninstall([harness], paths))
    assert snapshot(home) == before


@pytest.mark.parametrize("harness", NEXT)
def test_into_an_empty_home_and_out_again_leaves_nothing(tmp_path: Path, harness: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    paths = paths_for(home)
    installer.apply(installer.plan_install([harness], paths))
    assert config_file(home, harness).exists()
    installer.apply(installer.plan_uninstall([harness], paths))
    assert not any(p.is_file() for p in home.rglob("*")), list(home.rglob("*"))


def handlers_of(home: Path, harness: str) -> list[str]:
    data = json.loads(config_file(home, harness).read_text())
    if harness == "copilot":
        return [f"{ev}:{h['bash']}" for ev, hs in data["hooks"].items() for h in hs
                if installer_copilot.is_ours(h)]
    if harness == "opencode":
        return []
    return [f"{ev}:{h['command']}" for ev, gs in data["hooks"].items() for g in gs
            for h in g["hooks"] if "factbank_client/hooks.py" in h["command"]]


@pytest.mark.parametrize("harness", ["gemini", "qwen", "copilot"])
def test_hooks_name_the_harness_and_a_reinstall_from_elsewhere_replaces_them(
        tmp_path: Path, harness: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    paths = paths_for(home)
    installer.apply(installer.plan_install([harness], paths))
    first = handlers_of(home, harness)
    assert len(first) == 5 and all(h.endswith(f" {harness}") for h in first)
    other = common.Launcher("/opt/py/bin/python3", "/opt/fb/factbank_client/hooks.py")
    installer.apply(installer.plan_install([harness], paths, other))
    second = handlers_of(home, harness)
    assert len(second) == 5 and all("/opt/fb/factbank_client/hooks.py" in h for h in second)


def test_opencode_plugin_runs_this_hook_and_is_refused_over_a_foreign_file(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = paths_for(home)
    installer.apply(installer.plan_install(["opencode"], paths))
    plugin = installer_opencode.plugin_path(paths).read_text()
    assert json.dumps([common.python_exe(), "-I", "-S", common.hook_script()]) in plugin
    server = json.loads(config_file(home, "opencode").read_text())["mcp"]["factbank"]
    assert installer_opencode.is_our_server(server) and server["command"][-1] == "opencode"
    installer.apply(installer.plan_uninstall(["opencode"], paths))
    installer_opencode.plugin_path(paths).parent.mkdir(parents=True)
    installer_opencode.plugin_path(paths).write_text("export const Mine = async () => ({})\n")
    with pytest.raises(InstallError, match="not factbank's plugin"):
        installer.plan_install(["opencode"], paths)


def test_a_settings_file_with_comments_is_refused_untouched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = config_file(home, "gemini")
    target.parent.mkdir(parents=True)
    target.write_text('{\n  // my theme\n  "theme": "GitHub"\n}\n')
    with pytest.raises(InstallError, match="not valid JSON"):
        installer.plan_install(["gemini"], paths_for(home))


def test_install_all_touches_only_the_harnesses_that_are_present(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no harness binary on PATH
    home = tmp_path / "home"
    (home / ".qwen").mkdir(parents=True)
    paths = paths_for(home)
    assert installer.expand(["all"], paths) == ["claude", "codex", "pi", "qwen"]
    installer.apply(installer.plan_install(["all"], paths))
    assert (home / ".qwen" / "settings.json").exists()
    assert not any((home / d).exists() for d in (".gemini", ".copilot", ".config/opencode"))
    # A binary on PATH counts as present too.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "copilot").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "copilot").chmod(0o755)
    assert "copilot" in installer.expand(["all"], paths)
    installer.apply(installer.plan_uninstall(installer.expand(["all"], every=True), paths))
    assert not (home / ".qwen" / "settings.json").exists()


def test_the_health_page_shows_each_harness_and_its_registered_hooks(tmp_path: Path) -> None:
    from jinja2 import Environment, FileSystemLoader

    from factbank_client.dashboard import base, health_page

    home = tmp_path / "home"
    paths = paths_for(home)
    installer.apply(installer.plan_install(list(NEXT), paths))
    # The user deletes Copilot's hooks by hand: the page says so (0), the manifest does not.
    settings = config_file(home, "copilot")
    data = json.loads(settings.read_text())
    data["hooks"] = {}
    settings.write_text(json.dumps(data))
    wired = health_page.harnesses(home)
    assert wired["hooks"] == {"gemini": 5, "qwen": 5, "opencode": 1, "copilot": 0}
    env = Environment(loader=FileSystemLoader(str(base.HERE / "templates")), autoescape=True)
    env.globals.update(base.template_globals())
    html = env.get_template("health.html").render(
        services=[], bank_health=[], wired=wired, banks=[], csrf="c", nav="health")
    for name in NEXT:
        assert f"<strong>{name}</strong>" in html
    assert "plugin loaded at start" in html and '<span class="chip t-low">0</span>' in html
