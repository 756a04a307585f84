"""Gemini CLI, Qwen Code, OpenCode and Copilot CLI for real: `factbank install
<harness>` into a throwaway HOME, the real binary from npm, the real services (`factbank up`),
a fake model on loopback speaking the harness's protocol (Gemini streaming for Gemini CLI,
Chat Completions for the others).

* Each harness: the project fact (session start) and the prompt-matched fact reach the model.
* A fact saved through one harness's MCP tool (Gemini CLI) reaches the next session of another
  (Qwen Code, Copilot CLI) in the same repository, and not in another repository.
* A handoff left through one harness's MCP tool (Copilot CLI) is given to another (Gemini CLI)
  at its next session start.
* Each harness's file writes and shell commands reach the timeline (hooks, or OpenCode's
  plugin), named by that harness.
* With the service down, every hook stays silent and the run is no slower than without
  factbank.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from factbank.runtime.runner import free_port

from .e2e import Services, assert_ok, hook_log, install, login, make_repo, seed_facts
from .fake_model import FakeModel, Text, ToolCall
from .npm import HarnessUnavailable, NextHarnesses, ensure_next_harnesses
from .runners import RunResult
from .runners_next import RUNNERS, seed_opencode_dir

pytestmark = pytest.mark.harness


@pytest.fixture(scope="module")
def next_harnesses() -> NextHarnesses:
    try:
        return ensure_next_harnesses()
    except HarnessUnavailable as exc:
        pytest.skip(f"agent harnesses unavailable: {exc}")


def install_for(home: Path, harness: str) -> None:
    if harness == "opencode":
        seed_opencode_dir(home / ".config" / "opencode")
    out = install(home, harness)
    assert "created" in out


def model_saw(fake: FakeModel, since: int, marker: str) -> bool:
    return any(marker in r.dumps() for r in fake.requests[since:] if r.api is not None)


# (tool, arguments) of a file write and a shell command, as each harness's model calls them.
WRITES = {
    "gemini": lambda p: [ToolCall("write_file", {"file_path": p, "content": "x = 1\n"}),
                         ToolCall("run_shell_command", {"command": "ls src"})],
    "qwen": lambda p: [ToolCall("write_file", {"file_path": p, "content": "x = 1\n"}),
                       ToolCall("run_shell_command", {"command": "ls src"})],
    "copilot": lambda p: [ToolCall("create", {"path": p, "file_text": "x = 1\n"}),
                          ToolCall("bash", {"command": "ls src", "description": "list"})],
    "opencode": lambda p: [ToolCall("write", {"filePath": p, "content": "x = 1\n"}),
                           ToolCall("bash", {"command": "ls src", "description": "list"})],
}


@dataclass
class FirstRun:
    """One harness's first session in a repository with a project fact and a prompt-matched
    fact seeded, its model scripted to write a file and run a command."""

    harness: str
    home: Path
    repo: Path
    project: str
    fake: FakeModel
    result: RunResult
    marks: tuple[str, str]
    target: Path


@pytest.fixture(scope="module", params=["gemini", "qwen", "copilot", "opencode"])
def first_run(request: pytest.FixtureRequest, next_harnesses: NextHarnesses,
              services: Services, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[FirstRun]:
    """The run both the facts test and the timeline test read: they were a run each, and one
    Copilot or OpenCode start plus `factbank install` costs seconds to tens of seconds here.
    What each asserts needs nothing the other's scenario lacks: the facts reach the model at
    session start and with the prompt whatever the model answers, and the hooks record the
    file write and the command whatever was injected."""
    harness = request.param
    tmp = tmp_path_factory.mktemp(f"first-{harness}")
    home = tmp / "home"
    home.mkdir()
    project = f"github.com/acme/{harness}-e2e"
    repo = make_repo(tmp, "repo", f"git@github.com:acme/{harness}-e2e.git")
    (repo / "src").mkdir()
    s_mark, p_mark, prompt = seed_facts(services, harness.upper() + "26", project)
    login(home, services)
    install_for(home, harness)
    target = repo / "src" / f"new_{harness}.py"
    with FakeModel() as fake:
        fake.script(*WRITES[harness](str(target)), Text("Done."))
        result = RUNNERS[harness](home, repo, prompt, fake, harnesses=next_harnesses)
        (tmp / "requests.json").write_text(
            json.dumps([r.body for r in fake.requests if r.api is not None], indent=1))
        yield FirstRun(harness, home, repo, project, fake, result, (s_mark, p_mark), target)


def test_session_and_prompt_facts_reach_the_model(first_run: FirstRun,
                                                  services: Services) -> None:
    services.require_inject()
    harness, fake, result, home = (first_run.harness, first_run.fake, first_run.result,
                                   first_run.home)
    assert_ok(result, home)
    gen = [r for r in fake.requests if r.api is not None]
    assert gen, result.describe()
    for marker in first_run.marks:
        assert model_saw(fake, 0, marker), (
            f"{marker} never reached {harness}'s model\n{result.describe()}\n"
            + hook_log(home))
    # The instruction block (the user-level context file) and the MCP tools reached it too.
    assert model_saw(fake, 0, "factbank:begin"), result.describe()
    assert model_saw(fake, 0, MCP_ADD[harness]), result.describe()


# factbank's `add` as each harness names MCP tools (Qwen lists them by name only, deferred).
MCP_ADD = {"gemini": "mcp_factbank_add", "qwen": "mcp__factbank__add",
           "copilot": "factbank-add", "opencode": "factbank_add"}
SAVERS: dict[str, Callable[[dict], list[ToolCall]]] = {
    # Gemini names MCP tools mcp_<server>_<tool>; Qwen defers them behind tool_search.
    "gemini": lambda fact: [ToolCall("mcp_factbank_add", fact)],
    "qwen": lambda fact: [ToolCall("tool_search", {"query": "select:mcp__factbank__add"}),
                          ToolCall("mcp__factbank__add", fact)],
    "copilot": lambda fact: [ToolCall("factbank-add", fact)],
    "opencode": lambda fact: [ToolCall("factbank_add", fact)],
}


@pytest.mark.parametrize(("saver", "reader"), [
    ("gemini", "qwen"), ("qwen", "copilot"), ("copilot", "opencode"), ("opencode", "gemini")])
def test_a_fact_saved_in_one_harness_reaches_another_in_the_same_repo_only(
    saver: str, reader: str, next_harnesses: NextHarnesses, fake_model: FakeModel,
    harness_home: Path, tmp_path: Path, services: Services,
) -> None:
    services.require_inject()
    repo_a = make_repo(tmp_path, "api", f"git@github.com:acme/x26-{saver}-api.git")
    repo_b = make_repo(tmp_path, "web", f"git@github.com:acme/x26-{saver}-web.git")
    login(harness_home, services)
    install_for(harness_home, saver)
    install_for(harness_home, reader)
    marker = f"FBX26-{saver.upper()}"
    fact = {"content": f"The x26 api repository runs its tests with `make test-{marker}`.",
            "category": "project", "source_kind": "user", "source_location": "",
            "quote": f"run make test-{marker}", "origin": "user",
            "tags": ["tests", "测试", "make", marker]}
    fake_model.script(*SAVERS[saver](fact), Text("Saved it."))
    result = RUNNERS[saver](harness_home, repo_a, "Remember: tests run with make test.",
                            fake_model, harnesses=next_harnesses)
    assert_ok(result, harness_home)
    saved = [f for f in services.facts(category="project") if marker in f["content"]]
    assert len(saved) == 1, result.describe() + "\n" + json.dumps(
        [r.body for r in fake_model.requests if r.api][-1:])[:3000]
    assert saved[0]["project"] == f"github.com/acme/x26-{saver}-api"
    assert saved[0]["created_by"]["agent"] == saver

    before = len(fake_model.requests)
    result = RUNNERS[reader](harness_home, repo_a, "What should I know before I start?",
                             fake_model, harnesses=next_harnesses)
    assert_ok(result, harness_home)
    assert model_saw(fake_model, before, marker), hook_log(harness_home)
    before = len(fake_model.requests)
    result = RUNNERS[reader](harness_home, repo_b, "What should I know before I start?",
                             fake_model, harnesses=next_harnesses)
    assert_ok(result, harness_home)
    assert not model_saw(fake_model, before, marker)


def test_a_handoff_crosses_harnesses(
    next_harnesses: NextHarnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    services.require_inject()
    repo = make_repo(tmp_path, "handoff", "git@github.com:acme/x26-handoff.git")
    login(harness_home, services)
    install_for(harness_home, "copilot")
    install_for(harness_home, "gemini")
    note = "Greeting refactor half done: finish src/app.py (FBHANDOFF-26)"
    fake_model.script(ToolCall("factbank-handoff", {"text": note, "to_agent": "gemini"}),
                      Text("Left a handoff."))
    result = RUNNERS["copilot"](harness_home, repo, "hand this over to gemini", fake_model,
                                harnesses=next_harnesses)
    assert_ok(result, harness_home)
    before = len(fake_model.requests)
    result = RUNNERS["gemini"](harness_home, repo, "what is next?", fake_model,
                               harnesses=next_harnesses)
    assert_ok(result, harness_home)
    got = [r for r in fake_model.requests[before:] if "FBHANDOFF-26" in r.dumps()]
    assert got and "Handoff #" in got[0].dumps(), hook_log(harness_home)




# --- the timeline: each harness's file edits and commands ---------------------------------------


def test_file_edits_and_commands_reach_the_timeline(first_run: FirstRun,
                                                    services: Services) -> None:
    harness, result, home = first_run.harness, first_run.result, first_run.home
    assert_ok(result, home)
    assert first_run.target.exists(), result.describe()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        events = [e for e in services.timeline(first_run.project) if e.get("agent") == harness]
        kinds = {e["kind"] for e in events}
        if {"file", "command"} <= kinds:
            break
        time.sleep(0.5)
    assert {"file", "command"} <= kinds, (events, hook_log(home))
    assert any(f"new_{harness}.py" in json.dumps(e) for e in events if e["kind"] == "file")
    assert any("ls src" in json.dumps(e) for e in events if e["kind"] == "command")


# --- the service down: silent, and no slower ----------------------------------------------------


def drop_hooks(home: Path, harness: str) -> None:
    if harness == "opencode":
        (home / ".config" / "opencode" / "plugins" / "factbank.ts").unlink()
        return
    path = home / {"gemini": ".gemini", "qwen": ".qwen", "copilot": ".copilot"}[harness] / \
        "settings.json"
    data = json.loads(path.read_text())
    data.pop("hooks")
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("harness", ["gemini", "qwen", "copilot", "opencode"])
def test_hooks_are_silent_and_fast_when_the_service_is_down(
    harness: str, next_harnesses: NextHarnesses, fake_model: FakeModel, tmp_path: Path,
) -> None:
    """Against the same install without the hooks: each hook gives up at once on a refused
    connection (hooks.log says why) and never past its 0.9 s budget, so a run's five or so
    hook events cost at most a few seconds even on this 2-core box at load 12, where a
    harness's own start varies by a quarter."""
    repo = make_repo(tmp_path, "repo", f"git@github.com:acme/down26-{harness}.git")
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    homes = {}
    for name in ("without-hooks", "home"):
        home = homes[name] = tmp_path / name
        cfg = home / ".config" / "factbank" / "config.toml"
        cfg.parent.mkdir(parents=True)
        cfg.write_text(f'url = "{down}"\nrecall_url = "{down}"\n\n[banks.personal]\n'
                       'token = "fb_down"\n')
        install_for(home, harness)
    # The baseline: the same install (MCP server, instructions) minus the hooks / plugin, so
    # the difference is the hooks' alone (an MCP server's start is not theirs).
    drop_hooks(homes["without-hooks"], harness)
    baseline = RUNNERS[harness](homes["without-hooks"], repo, "hello", fake_model,
                                harnesses=next_harnesses)
    assert baseline.returncode == 0, baseline.describe()
    home = homes["home"]
    before = len(fake_model.requests)
    result = RUNNERS[harness](home, repo, "hello", fake_model, harnesses=next_harnesses)
    assert_ok(result, home)
    # Nothing from the hooks reached the model or the terminal...
    assert not any("[factbank]" in r.dumps() for r in fake_model.requests[before:])
    assert "factbank" not in result.stderr.lower() and "Traceback" not in result.stdout
    # ... and the run is no slower than the same one without the hooks, beyond noise.
    assert result.seconds < baseline.seconds * 1.25 + 5 * 0.9, (baseline.seconds,
                                                                result.seconds)
    assert "Connection refused" in hook_log(home) or "gave up" in hook_log(home)


# --- the stop reminder: once after five prompts, never a loop ------------------------------------
RESUME = {"gemini": ["--resume", "latest"], "copilot": ["--continue"], "qwen": ["--continue"],
          "opencode": ["--continue"]}


@pytest.mark.parametrize("harness", ["gemini", "copilot", "qwen", "opencode"])
def test_the_stop_reminder_comes_once_after_five_prompts(
    harness: str, next_harnesses: NextHarnesses, fake_model: FakeModel, harness_home: Path,
    tmp_path: Path, services: Services,
) -> None:
    """Gemini's AfterAgent, Qwen's Stop and Copilot's agentStop take `decision: block` +
    `reason` as the next prompt: the turn goes on once with the reminder, then stops.
    OpenCode's plugin cannot block its stop: the sixth prompt carries the reminder."""
    repo = make_repo(tmp_path, "repo", f"git@github.com:acme/stop26-{harness}.git")
    login(harness_home, services)
    install_for(harness_home, harness)
    last = 6 if harness == "opencode" else 5
    for n in range(1, last + 1):
        before = len(fake_model.requests)
        result = RUNNERS[harness](harness_home, repo, f"prompt number {n}", fake_model,
                                  harnesses=next_harnesses,
                                  extra_args=[] if n == 1 else RESUME[harness])
        assert_ok(result, harness_home)
        gen = [r for r in fake_model.requests[before:] if r.api is not None]
        reminded = [r for r in gen if "factbank reminder" in r.dumps()]
        if n < last:
            assert not reminded, f"reminded after {n} prompts"
        else:
            # One more turn carried the reminder, then the harness stopped (no loop).
            assert len(reminded) == 1, (len(gen), result.describe(), hook_log(harness_home))
