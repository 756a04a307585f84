"""Dispatch from the dashboard in a real browser, with a real harness binary (Claude Code from
npm) against the fake model server: the live log shows a shell command with its exit code and
a file edit as they happen, the run ends done, it becomes a handoff in one click, and a
dashboard started afresh over the same run store still lists it."""

from __future__ import annotations

import os

import pytest

from factbank.runtime.runner import serve_apps_in_thread
from factbank_client.dashboard import app as dashboard_app
from factbank_client.dashboard import security
from tests.browser.stack import SHOTS
from tests.harness.e2e import FAIL, repository
from tests.harness.fake_model import FakeModel, Text, ToolCall
from tests.harness.npm import HarnessUnavailable, ensure_harnesses
from tests.harness.runners import claude_env, claude_settings_path, write_json

pytestmark = pytest.mark.harness


def _dashboard(live, runs, env, binaries):
    keys = security.Secrets()
    gate = dashboard_app.create(live.config, keys, 0, dispatch_dir=runs, dispatch_env=env,
                                dispatch_binaries=binaries)
    return keys, gate


def test_dispatch_streams_a_command_and_an_edit_then_hands_off(browser, live, tmp_path):
    try:
        harnesses = ensure_harnesses()
    except HarnessUnavailable as exc:
        pytest.skip(f"agent harnesses unavailable: {exc}")
    home = tmp_path / "home"
    home.mkdir()
    repo = repository(tmp_path / "repo", "git@github.com:acme/dispatch-e2e.git")
    runs = tmp_path / "runs"
    with FakeModel() as fake:
        write_json(claude_settings_path(home), {"permissions": {"allow": ["Bash"]}})
        fake.script(ToolCall("Bash", {"command": FAIL}),
                    ToolCall("Write", {"file_path": str(repo / "notes.md"), "content": "hi\n"}),
                    Text("done: left a note"))
        env = claude_env(home, fake, harnesses)
        keys, gate = _dashboard(live, runs, env, {"claude": str(harnesses.claude)})
        with serve_apps_in_thread({"dash": gate}) as urls:
            url = urls["dash"]
            gate.hosts = security.allowed_hosts(int(url.rsplit(":", 1)[1]))
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{url}/dispatch?token={keys.launch}")
            page.select_option("select[name=agent]", "claude")
            page.fill("input[name=repo]", str(repo))
            page.fill("textarea[name=task]", "Look around and leave a note.")
            page.click("button:has-text('Dispatch')")
            assert "started Claude Code" in page.inner_text(".flash.ok")
            log = page.locator("#run-log")
            # The live log: the failing command with its exit code, then the edit.
            log.locator(".ev-line.k-command", has_text=FAIL).wait_for(timeout=120_000)
            assert "exit 2" in log.locator(".ev-line.k-command").first.inner_text()
            log.locator(".ev-line.k-edit", has_text="notes.md").wait_for(timeout=120_000)
            page.wait_for_selector("button:has-text('Hand off')", timeout=120_000)
            assert page.inner_text("#run-state").startswith("done")
            if os.environ.get("FACTBANK_SCREENSHOTS") == "1":
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "dispatch.png"))
            assert (repo / "notes.md").read_text() == "hi\n"
            page.select_option("select[name=to_agent]", "codex")
            page.click("button:has-text('Hand off')")
            assert "handoff #" in page.inner_text(".flash.ok")
            assert page.locator(".chip.k-handoff").count() == 1
            context.close()
            assert not errors, errors
    # A fresh dashboard (a restart) over the same store still lists the run, with its log.
    keys2, gate2 = _dashboard(live, runs, None, None)
    with serve_apps_in_thread({"dash": gate2}) as urls:
        url = urls["dash"]
        gate2.hosts = security.allowed_hosts(int(url.rsplit(":", 1)[1]))
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{url}/dispatch?token={keys2.launch}")
        assert page.locator(".run-item").count() == 1
        assert "done" in page.inner_text(".run-item")
        assert page.locator("#run-log .ev-line.k-edit", has_text="notes.md").count() == 1
        context.close()
