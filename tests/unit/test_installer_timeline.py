"""The installer registers the timeline's hooks: PostToolUse (Claude Code: only its
edit tools and Bash), PostToolUseFailure (Claude Code's failed Bash) and SessionEnd, next to
the three hooks it always had, whose commands stay byte for byte what an earlier install
wrote (Codex trusts a hook by its hash: a changed command is silently skipped)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from factbank_client.install import common
from factbank_client.install import harnesses as installer
from factbank_client.install.files import is_our_handler

SHARED = Path(os.environ.get("FACTBANK_SHARED_DIR")
              or Path(__file__).resolve().parents[3] / "shared")
CLAUDE_SCHEMA = SHARED / "hook-schemas" / "claude-code" / "claude-code-settings.json"
CODEX_SCHEMA = SHARED / "hook-schemas" / "codex" / "schemastore-codex-hooks.json"
OLD_EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit",
              "Stop": "stop"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def paths(home: Path) -> common.Paths:
    return common.Paths.from_env({"HOME": str(home)})


def ours(data: dict, event: str) -> list[tuple[dict, dict]]:
    """(group, handler) of factbank's handlers for `event`."""
    return [(g, h) for g in data["hooks"].get(event, []) for h in g["hooks"]
            if is_our_handler(h)]


def command(arg: str) -> str:
    return common.hook_command(arg)


def test_claude_gets_the_recording_hooks_with_matchers(home: Path) -> None:
    installer.apply(installer.plan_install(["claude"], paths(home)))
    data = json.loads((home / ".claude" / "settings.json").read_text())
    if CLAUDE_SCHEMA.exists():
        jsonschema.Draft7Validator(json.loads(CLAUDE_SCHEMA.read_text())).validate(data)
    expected = {"SessionStart": None, "UserPromptSubmit": None, "Stop": None,
                "PostToolUse": "Edit|Write|MultiEdit|NotebookEdit|Bash",
                "PostToolUseFailure": "Bash", "SessionEnd": None}
    assert list(data["hooks"]) == list(expected)
    for event, matcher in expected.items():
        ((group, handler),) = ours(data, event)
        assert group.get("matcher") == matcher
        assert handler["command"] == command(common.HOOK_EVENTS[event])
        assert handler["timeout"] == common.HOOK_TIMEOUT


def test_codex_gets_posttooluse_for_every_tool_and_sessionend(home: Path) -> None:
    installer.apply(installer.plan_install(["codex"], paths(home)))
    data = json.loads((home / ".codex" / "hooks.json").read_text())
    if CODEX_SCHEMA.exists():
        jsonschema.Draft7Validator(json.loads(CODEX_SCHEMA.read_text())).validate(data)
    assert list(data["hooks"]) == ["SessionStart", "UserPromptSubmit", "Stop", "PostToolUse",
                                   "SessionEnd"]  # Codex has no PostToolUseFailure
    ((group, handler),) = ours(data, "PostToolUse")
    assert "matcher" not in group and handler["command"] == command("post-tool-use")


def test_an_upgrade_keeps_the_old_hooks_byte_for_byte_and_in_place(home: Path) -> None:
    """An install from before the timeline hooks (three events, written as that installer
    wrote them, after a hook of the user's): a re-install adds the new events after them and
    leaves every earlier handler, group and position as it was."""
    old = {"hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        **{event: [{"hooks": [{"type": "command", "command": command(arg),
                               "timeout": common.HOOK_TIMEOUT}]}]
           for event, arg in OLD_EVENTS.items() if event != "Stop"},
    }}
    old["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": command("stop"),
                                            "timeout": common.HOOK_TIMEOUT}]})
    for path in (home / ".claude" / "settings.json", home / ".codex" / "hooks.json"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(old, indent=2) + "\n")
    installer.apply(installer.plan_install(["claude", "codex"], paths(home)))
    for path in (home / ".claude" / "settings.json", home / ".codex" / "hooks.json"):
        data = json.loads(path.read_text())
        for event in OLD_EVENTS:
            assert data["hooks"][event] == old["hooks"][event], (path, event)
        assert ours(data, "PostToolUse") and ours(data, "SessionEnd")
    again = installer.plan_install(["claude", "codex"], paths(home))
    assert again.empty, again.diff()  # re-runnable in place


def test_uninstall_removes_the_new_hooks_exactly(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    user = {"hooks": {"PostToolUse": [{"matcher": "Write", "hooks": [
        {"type": "command", "command": "prettier --write"}]}]}, "model": "opus"}
    raw = json.dumps(user, indent=2) + "\n"
    settings.write_text(raw)
    installer.apply(installer.plan_install(["claude"], paths(home)))
    data = json.loads(settings.read_text())
    assert data["hooks"]["PostToolUse"][0] == user["hooks"]["PostToolUse"][0]
    assert ours(data, "PostToolUse")[0][0]["matcher"].startswith("Edit|")
    installer.apply(installer.plan_uninstall(["claude"], paths(home)))
    assert settings.read_text() == raw
