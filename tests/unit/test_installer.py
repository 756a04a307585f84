"""`factbank install|uninstall` against throwaway homes that already hold realistic config:
other hooks and MCP servers, comments, odd indentation, user text around our block.

What must hold (docs/principles.md#installers-respect-the-users-files): the result validates against
the harnesses' schemas; everything
the user had stays byte for byte where it was; re-running changes nothing; reinstalling from
another path replaces our entries in place; uninstall restores every file exactly and deletes
only files the installer created; --dry-run shows the diff and writes nothing.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import tomlkit

from factbank_client.errors import InstallError
from factbank_client.install import common
from factbank_client.install import harnesses as installer
from factbank_client.install.files import BLOCK_BEGIN, BLOCK_END, is_our_handler

SHARED_DIR = Path(
    os.environ.get("FACTBANK_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared"
)
CLAUDE_SCHEMA = SHARED_DIR / "hook-schemas" / "claude-code" / "claude-code-settings.json"
CODEX_HOOKS_SCHEMA = SHARED_DIR / "hook-schemas" / "codex" / "schemastore-codex-hooks.json"

CLAUDE_SETTINGS = json.dumps({
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "env": {"DISABLE_TELEMETRY": "1"},
    "permissions": {"allow": ["Bash(npm run lint)", "Read(~/.zshrc)"], "deny": ["Bash(curl:*)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "~/.claude/guard.sh", "timeout": 10}]}],
        "SessionStart": [{"matcher": "startup", "hooks": [
            {"type": "command", "command": "echo '{}' > /dev/null"}]}],
    },
    "statusLine": {"type": "command", "command": "~/.claude/status.sh"},
}, indent=4) + "\n"

CLAUDE_JSON = json.dumps({
    "numStartups": 42,
    "installMethod": "npm",
    "autoUpdates": False,
    "projects": {"/home/me/src/api": {"allowedTools": [], "history": [{"display": "fix tests"}]}},
    "mcpServers": {"github": {"type": "stdio", "command": "npx",
                              "args": ["-y", "@modelcontextprotocol/server-github"],
                              "env": {"GITHUB_TOKEN_ENV": "GH"}}},
    "userID": "f00",
}, indent=2)  # no trailing newline, like Claude Code writes it

CLAUDE_MD = """# My global rules

- Answer in English unless I write Chinese (用中文回答中文问题).
- Prefer small commits.
"""

CODEX_CONFIG = """\
# Codex config: hand-written, keep my comments!
model = "gpt-5.5"   # the default model
approval_policy = "on-request"

[features]
  # indented on purpose
  web_search = true

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env_vars = ["GITHUB_TOKEN"]   # never inline

[profiles.fast]
model = "gpt-5.5-mini"
"""

CODEX_HOOKS = json.dumps({"hooks": {
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'codex done'"}]}],
    "PreToolUse": [{"matcher": "shell", "hooks": [
        {"type": "command", "command": "/usr/local/bin/audit-shell", "timeout": 3}]}],
}}, indent="\t") + "\n"

CODEX_AGENTS = "Always run `make check` before saying you are done.\n"
PI_AGENTS = "# Pi\n\nUse ripgrep.\n"
PI_OTHER_EXT = "export default function (pi: any) { /* someone else's */ }\n"


def seed(home: Path) -> dict[Path, str]:
    files = {
        home / ".claude" / "settings.json": CLAUDE_SETTINGS,
        home / ".claude.json": CLAUDE_JSON,
        home / ".claude" / "CLAUDE.md": CLAUDE_MD,
        home / ".codex" / "config.toml": CODEX_CONFIG,
        home / ".codex" / "hooks.json": CODEX_HOOKS,
        home / ".codex" / "AGENTS.md": CODEX_AGENTS,
        home / ".pi" / "agent" / "AGENTS.md": PI_AGENTS,
        home / ".pi" / "agent" / "extensions" / "other.ts": PI_OTHER_EXT,
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (home / ".claude" / "settings.json").chmod(0o600)
    return files


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def paths_for(home: Path) -> common.Paths:
    return common.Paths.from_env({"HOME": str(home)})


OTHER = common.Launcher("/opt/factbank-venv/bin/python3",
                          "/opt/factbank-venv/lib/python3.11/site-packages/factbank_client/hooks.py")


def install(home: Path, names=("all",),
            launcher: common.Launcher | None = None) -> installer.Plan:
    plan = installer.plan_install(list(names), paths_for(home), launcher)
    installer.apply(plan)
    return plan


def uninstall(home: Path, names=("all",)) -> installer.Plan:
    plan = installer.plan_uninstall(list(names), paths_for(home))
    installer.apply(plan)
    return plan


def only_additions(before: str, after: str) -> None:
    """Every line the user had is still there, in order; the only allowed edit is a comma
    appended to the line before a JSON list item we appended."""
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            assert f"+ {line[2:]}," in after.splitlines() or \
                (line[2:] + ",") in after.splitlines(), f"user line changed: {line!r}"


# --- install into realistic existing config ---------------------------------------------------


def test_install_all_into_existing_config(home: Path) -> None:
    original = seed(home)
    install(home)

    settings = json.loads((home / ".claude" / "settings.json").read_text())
    jsonschema.Draft7Validator(json.loads(CLAUDE_SCHEMA.read_text())).validate(settings)
    hooks = settings["hooks"]
    assert hooks["PreToolUse"] == json.loads(CLAUDE_SETTINGS)["hooks"]["PreToolUse"]
    assert hooks["SessionStart"][0]["matcher"] == "startup"  # the user's group stays first
    for event, arg in (("SessionStart", "session-start"),
                       ("UserPromptSubmit", "user-prompt-submit"), ("Stop", "stop")):
        ours = [h for g in hooks[event] for h in g["hooks"] if is_our_handler(h)]
        assert len(ours) == 1
        assert ours[0]["command"] == (f"{common.python_exe()} -I -S "
                                      f"{common.hook_script()} {arg}")
        assert ours[0]["timeout"] == common.HOOK_TIMEOUT
    assert settings["permissions"]["allow"][:2] == ["Bash(npm run lint)", "Read(~/.zshrc)"]
    assert "mcp__factbank__add" in settings["permissions"]["allow"]
    assert "mcp__factbank__delete" not in settings["permissions"]["allow"]
    assert (home / ".claude" / "settings.json").stat().st_mode & 0o777 == 0o600
    text = (home / ".claude" / "settings.json").read_text()
    assert text.startswith('{\n    "$schema"'), "4-space indentation kept"
    only_additions(CLAUDE_SETTINGS, text)

    cj_text = (home / ".claude.json").read_text()
    cj = json.loads(cj_text)
    assert cj["mcpServers"]["github"] == json.loads(CLAUDE_JSON)["mcpServers"]["github"]
    assert cj["mcpServers"]["factbank"] == {
        "type": "stdio", "command": common.python_exe(),
        "args": ["-P", "-m", "factbank_client.cli.main", "mcp", "--agent", "claude-code"],
        "env": {}}
    assert not cj_text.endswith("\n"), "no trailing newline added"
    assert list(cj) == [*json.loads(CLAUDE_JSON)]  # key order kept
    only_additions(CLAUDE_JSON, cj_text)

    codex_hooks_text = (home / ".codex" / "hooks.json").read_text()
    codex_hooks = json.loads(codex_hooks_text)
    jsonschema.Draft7Validator(json.loads(CODEX_HOOKS_SCHEMA.read_text())).validate(codex_hooks)
    assert codex_hooks["hooks"]["Stop"][0]["hooks"][0]["command"] == "notify-send 'codex done'"
    assert is_our_handler(codex_hooks["hooks"]["Stop"][1]["hooks"][0])
    assert "\n\t\t\"Stop\"" in codex_hooks_text, "tab indentation kept"
    only_additions(CODEX_HOOKS, codex_hooks_text)

    config_text = (home / ".codex" / "config.toml").read_text()
    assert config_text.startswith(CODEX_CONFIG), "every byte of the user's config kept"
    server = tomlkit.parse(config_text)["mcp_servers"]["factbank"].unwrap()
    assert server == {
        "command": common.python_exe(),
        "args": ["-P", "-m", "factbank_client.cli.main", "mcp", "--agent", "codex"],
        "env_vars": list(common.CODEX_ENV_VARS),
        "default_tools_approval_mode": "approve"}
    assert "fb_" not in config_text and "token =" not in config_text

    for path in (home / ".claude" / "CLAUDE.md", home / ".codex" / "AGENTS.md",
                 home / ".pi" / "agent" / "AGENTS.md"):
        text = path.read_text()
        assert text.startswith(original[path]), "user text first, untouched"
        assert text.count(BLOCK_BEGIN) == 1 and text.rstrip().endswith(BLOCK_END)
    block = (home / ".codex" / "AGENTS.md").read_text()
    for must in ("context, not truth", "Search before", "AT ONCE", "verbatim quote",
                 "BOTH Chinese and English", "`confirm`", "`dispute`", "`supersede`",
                 "Never store secrets", "one atomic fact", "2-4 `questions`",
                 "BOTH English and Chinese", "not\n  the fact's own wording", "0.60 to 0.94"):
        assert must in block, must

    ext = home / ".pi" / "agent" / "extensions" / "factbank.ts"
    assert common.PI_MARKER in ext.read_text()
    # Written with the tool texts and constants filled in, never as the bare asset.
    assert ext.read_text() == common.pi_extension_text()
    assert common.PI_SHARED not in ext.read_text() and '"factbank_search"' in ext.read_text()
    assert (home / ".pi" / "agent" / "extensions" / "other.ts").read_text() == PI_OTHER_EXT


def test_rerun_changes_nothing(home: Path) -> None:
    seed(home)
    install(home)
    before = snapshot(home)
    again = installer.plan_install(["all"], paths_for(home))
    assert again.empty and again.manifest is None, again.diff()
    installer.apply(again)
    assert snapshot(home) == before


def test_reinstall_from_another_path_replaces_in_place(home: Path) -> None:
    seed(home)
    install(home)
    first = json.loads((home / ".codex" / "hooks.json").read_text())
    install(home, launcher=OTHER)

    for path in (home / ".claude" / "settings.json", home / ".codex" / "hooks.json"):
        data = json.loads(path.read_text())
        for event in ("SessionStart", "UserPromptSubmit", "Stop"):
            cmds = [h["command"] for g in data["hooks"][event] for h in g["hooks"]
                    if is_our_handler(h)]
            assert len(cmds) == 1 and cmds[0].startswith(f"{OTHER.python} -I -S {OTHER.script}")
    second = json.loads((home / ".codex" / "hooks.json").read_text())
    # Same positions (Codex's trust keys are <file>:<event>:<group>:<handler>).
    for event, groups in first["hooks"].items():
        assert len(second["hooks"][event]) == len(groups)
    cj = json.loads((home / ".claude.json").read_text())
    assert cj["mcpServers"]["factbank"]["command"] == OTHER.python
    config = tomlkit.parse((home / ".codex" / "config.toml").read_text())
    assert config["mcp_servers"]["factbank"]["command"] == OTHER.python
    for path in (home / ".claude" / "CLAUDE.md", home / ".codex" / "AGENTS.md"):
        assert path.read_text().count(BLOCK_BEGIN) == 1


def test_uninstall_restores_every_file_exactly(home: Path) -> None:
    seed(home)
    before = snapshot(home)
    install(home)
    install(home, launcher=OTHER)  # a reinstall from elsewhere in between changes nothing
    uninstall(home)
    after = snapshot(home)
    assert after == before


def test_install_into_empty_home_then_uninstall_leaves_nothing(home: Path) -> None:
    install(home)
    created = snapshot(home)
    assert ".claude/settings.json" in created and ".codex/config.toml" in created
    assert ".pi/agent/extensions/factbank.ts" in created
    jsonschema.Draft7Validator(json.loads(CODEX_HOOKS_SCHEMA.read_text())).validate(
        json.loads(created[".codex/hooks.json"]))
    uninstall(home)
    assert snapshot(home) == {}
    leftovers = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert leftovers in ([], [".config", ".config/factbank"]), leftovers


def test_uninstall_one_harness_keeps_the_others(home: Path) -> None:
    seed(home)
    original = snapshot(home)
    install(home)
    uninstall(home, ["codex"])
    now = snapshot(home)
    for name in (".codex/config.toml", ".codex/hooks.json", ".codex/AGENTS.md"):
        assert now[name] == original[name]
    assert BLOCK_BEGIN in now[".claude/CLAUDE.md"]
    assert ".pi/agent/extensions/factbank.ts" in now
    manifest = json.loads(now[".config/factbank/install-manifest.json"])
    assert set(manifest["harnesses"]) == {"claude", "pi"}


def test_user_edits_around_the_block_survive(home: Path) -> None:
    seed(home)
    install(home, ["claude"])
    md = home / ".claude" / "CLAUDE.md"
    md.write_text(md.read_text() + "\n## Added later by the user\n- keep me\n")
    install(home, ["claude"])  # block replaced in place, user's new text stays after it
    text = md.read_text()
    assert text.index(BLOCK_END) < text.index("## Added later by the user")
    uninstall(home, ["claude"])
    assert md.read_text() == CLAUDE_MD + "\n## Added later by the user\n- keep me\n"


def test_outdated_block_is_replaced_in_place(home: Path) -> None:
    md = home / ".codex" / "AGENTS.md"
    md.parent.mkdir(parents=True)
    md.write_text(f"top\n\n{BLOCK_BEGIN}\nold instructions\n{BLOCK_END}\n\nbottom\n")
    install(home, ["codex"])
    text = md.read_text()
    assert text.startswith("top\n\n" + BLOCK_BEGIN) and text.endswith(f"{BLOCK_END}\n\nbottom\n")
    assert "old instructions" not in text and "AT ONCE" in text


def test_duplicate_factbank_hooks_are_collapsed(home: Path) -> None:
    hooks = home / ".codex" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    stale = {"type": "command", "command": "/old/python -m factbank_client.hooks stop"}
    older = {"type": "command", "command": "/o/bin/python3 -I -S /o/factbank_client/hooks.py stop"}
    hooks.write_text(json.dumps({"hooks": {"Stop": [
        {"hooks": [stale]}, {"hooks": [{"type": "command", "command": "x"}, older]}]}}))
    install(home, ["codex"])
    stop = json.loads(hooks.read_text())["hooks"]["Stop"]
    commands = [h["command"] for g in stop for h in g["hooks"]]
    assert commands == [common.hook_command("stop"), "x"]


def test_uninstall_without_manifest_removes_ours_but_deletes_nothing(home: Path) -> None:
    install(home, ["claude"])
    (home / ".config" / "factbank" / "install-manifest.json").unlink()
    uninstall(home, ["claude"])
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert "factbank_client" not in json.dumps(settings.get("hooks", {}))
    assert "factbank" not in json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert BLOCK_BEGIN not in (home / ".claude" / "CLAUDE.md").read_text()


def test_unparsable_file_refuses_and_writes_nothing(home: Path) -> None:
    seed(home)
    (home / ".claude" / "settings.json").write_text('{"hooks": {,}')
    before = snapshot(home)
    with pytest.raises(InstallError, match="not valid JSON"):
        installer.plan_install(["all"], paths_for(home))
    assert snapshot(home) == before
    (home / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS)
    (home / ".codex" / "config.toml").write_text("model = \n[[")
    with pytest.raises(InstallError, match="not valid TOML"):
        installer.plan_install(["codex"], paths_for(home))


def test_someone_elses_pi_extension_is_not_overwritten(home: Path) -> None:
    ext = home / ".pi" / "agent" / "extensions" / "factbank.ts"
    ext.parent.mkdir(parents=True)
    ext.write_text(PI_OTHER_EXT)
    with pytest.raises(InstallError, match="not factbank's"):
        installer.plan_install(["pi"], paths_for(home))
    assert ext.read_text() == PI_OTHER_EXT


def test_harness_dir_overrides(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "h"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cc"),
           "CODEX_HOME": str(tmp_path / "cx"), "PI_CODING_AGENT_DIR": str(tmp_path / "pi"),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    paths = common.Paths.from_env(env)
    installer.apply(installer.plan_install(["all"], paths))
    assert (tmp_path / "cc" / "settings.json").exists()
    assert (tmp_path / "cc" / ".claude.json").exists()
    assert (tmp_path / "cx" / "hooks.json").exists()
    assert (tmp_path / "pi" / "extensions" / "factbank.ts").exists()
    assert (tmp_path / "xdg" / "factbank" / "install-manifest.json").exists()
    assert not (tmp_path / "h").exists()


def test_unknown_harness() -> None:
    with pytest.raises(InstallError):
        installer.expand(["vim"])
    assert installer.expand(["pi", "all"]) == ["pi", "claude", "codex"]


# --- the CLI ----------------------------------------------------------------------------------


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR",
                        "XDG_CONFIG_HOME")}
    env["HOME"] = str(home)
    # Not `-m factbank_client.cli.main`: run as __main__, its CommandError is another class
    # than the one the command modules import, and errors would become tracebacks.
    code = "import sys; from factbank_client.cli.main import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_cli_dry_run_shows_the_diff_and_writes_nothing(home: Path) -> None:
    seed(home)
    before = snapshot(home)
    proc = run_cli(home, "install", "all", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(home) == before
    out = proc.stdout
    assert f"+++ {home}/.claude/settings.json" in out
    assert "+[mcp_servers.factbank]" in out
    assert f"+++ {home}/.pi/agent/extensions/factbank.ts" in out
    assert "dry run" in out

    assert run_cli(home, "install", "all").returncode == 0
    installed = snapshot(home)
    proc = run_cli(home, "uninstall", "claude", "--dry-run")
    assert proc.returncode == 0 and snapshot(home) == installed
    assert f"--- {home}/.claude/settings.json" in proc.stdout
    assert "-<!-- factbank:begin" in proc.stdout


def test_cli_install_uninstall_round_trip(home: Path) -> None:
    seed(home)
    before = snapshot(home)
    proc = run_cli(home, "install", "codex", "claude")
    assert proc.returncode == 0, proc.stderr
    assert "/hooks" in proc.stdout and "--trust" in proc.stdout  # how to trust Codex hooks
    proc = run_cli(home, "install", "codex")
    assert "up to date" in proc.stdout
    assert run_cli(home, "uninstall", "all").returncode == 0
    assert snapshot(home) == before


def test_cli_reports_bad_files_in_one_line(home: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text("{oops")
    proc = run_cli(home, "install", "claude")
    assert proc.returncode == 2
    assert proc.stderr.startswith("factbank: ") and "Traceback" not in proc.stderr


def test_unsafe_toml_shape_is_refused(home: Path) -> None:
    cfg = home / ".codex" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('mcp_servers.factbank.command = "old"\nmodel = "m"\n')
    with pytest.raises(InstallError, match="cannot edit"):
        installer.plan_install(["codex"], paths_for(home))


# --- the stand-in schemas (tests/fixtures/shared-standin) against upstream ------------------

STANDIN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "shared-standin"
UPSTREAM_DIR = (
    SHARED_DIR if SHARED_DIR != STANDIN_DIR else Path(__file__).resolve().parents[3] / "shared"
)


def test_standin_schemas_agree_with_upstream(home: Path) -> None:
    """A plain clone validates against hand-written stand-ins; where ../shared exists, each
    stand-in must give the upstream schema's verdict on what the tests produce and on documents
    that must be rejected (so the stand-ins are not weaker where the tests rely on them)."""
    if not (UPSTREAM_DIR / "hook-schemas").is_dir():
        pytest.skip(f"no upstream schemas at {UPSTREAM_DIR} (../shared is not part of a clone); "
                    "the other tests used the stand-ins in tests/fixtures/shared-standin")
    seed(home)
    install(home)
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    codex_hooks = json.loads((home / ".codex" / "hooks.json").read_text())
    ours = settings["hooks"]["Stop"][-1]
    start = {"hookEventName": "SessionStart", "additionalContext": "facts"}
    cases: dict[str, list[tuple[object, bool]]] = {
        "claude-code/claude-code-settings.json": [
            (settings, True),
            ({"hooks": {"NoSuchEvent": [ours]}}, False),
            ({"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}, False),
            ({"hooks": {"Stop": [{**ours, "extra": 1}]}}, False),
        ],
        "codex/schemastore-codex-hooks.json": [
            (codex_hooks, True),
            ({"hooks": {}}, False),
            ({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": ""}]}]}}, False),
        ],
        "codex/session-start.command.output.schema.json": [
            ({"hookSpecificOutput": start}, True),
            ({}, True),
            ({"hookSpecificOutput": {**start, "hookEventName": "Stop"}}, False),
            ({"unknown": 1}, False),
        ],
        "codex/user-prompt-submit.command.output.schema.json": [
            ({"hookSpecificOutput": {**start, "hookEventName": "UserPromptSubmit"}}, True),
            ({"hookSpecificOutput": start}, False),
        ],
        "codex/post-tool-use.command.output.schema.json": [
            ({"hookSpecificOutput": {**start, "hookEventName": "PostToolUse"}}, True),
            ({}, True),
            ({"hookSpecificOutput": start}, False),
            ({"unknown": 1}, False),
        ],
        "codex/stop.command.output.schema.json": [
            ({}, True), ({"decision": "block", "reason": "r"}, True),
            ({"hookSpecificOutput": start}, False),
        ],
    }
    for name, docs in cases.items():
        for which in (STANDIN_DIR, UPSTREAM_DIR):
            validator = jsonschema.Draft7Validator(
                json.loads((which / "hook-schemas" / name).read_text()))
            for doc, valid in docs:
                assert validator.is_valid(doc) is valid, (which, name, doc)
    import yaml  # the compose stand-in, the same way (test_compose validates with whichever)

    compose = yaml.safe_load((Path(__file__).resolve().parents[2] / "compose.yaml").read_text())
    for path in (STANDIN_DIR / "schemas" / "compose-spec.json",
                 UPSTREAM_DIR / "schemas" / "compose-spec.json"):
        validator = jsonschema.Draft7Validator(json.loads(path.read_text()))
        assert validator.is_valid(compose), path
        assert not validator.is_valid({"services": {"a": {"imagee": "x"}}}), path
        assert not validator.is_valid({"services": {"a": {"depends_on": {"b": {"x": 1}}}}}), path
