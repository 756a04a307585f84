"""factbank for real: the real services, the real installer, the real harnesses.

One `factbank up` (embedded Postgres, both services, free ports, FACTBANK_HOME in a temp dir)
serves the session, and the module has a bank of its own on it (tests/harness/e2e.py). Each
test makes a throwaway HOME holding a factbank client config, runs `factbank install
<harness>` into it through the CLI, and runs the harness non-interactively against the fake
model server. Everything is asserted from what the fake model received.

* Claude Code, Codex, Pi: a project fact reaches the model at session start, a prompt-matched
  fact reaches it with the prompt (Codex with its hooks trusted by `--trust`, no bypass flag).
* The product: a fact saved through Codex's MCP `add` tool (the fake model calls it) is in
  front of the next Claude Code session in the same repository, and absent in another one;
  saved with writer questions, it reaches a Claude Code prompt that shares no word with it.
* Pi's own tools: `factbank_add` stores a fact, `factbank_search` finds it.
* Claude Code, Codex: the Stop reminder comes once after five prompts, and never loops.

A scenario that every harness goes through is one test parametrised by harness: its
parameters are how that harness installs, runs and shows the facts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from .e2e import (
    Services,
    assert_ok,
    hook_log,
    install,
    install_all_for_codex_to_claude,
    login,
    make_repo,
    seed_facts,
)
from .fake_model import FakeModel, Text, ToolCall, tool_names
from .npm import Harnesses
from .runners import configure_codex_home, run_claude, run_codex, run_pi

pytestmark = pytest.mark.harness


# --- injection in each harness ----------------------------------------------------------------
# One scenario, three harnesses: seed a project fact and a prompt-matched gotcha, install,
# run one prompt, and look for both in what the model received. Each harness installs, runs
# and shows the facts its own way; those three steps are the parameters.


def _install_claude(home: Path, fake_model: FakeModel, harnesses: Harnesses) -> None:
    install(home, "claude")


def _install_codex_trusted(home: Path, fake_model: FakeModel, harnesses: Harnesses) -> None:
    configure_codex_home(home, fake_model)  # offline switches before app-server runs
    out = install(home, "codex", "--trust", "--codex-bin", str(harnesses.codex))
    assert "trusted 5 factbank hook(s)" in out  # facts: 3; the timeline: PostToolUse, SessionEnd


def _install_pi(home: Path, fake_model: FakeModel, harnesses: Harnesses) -> None:
    install(home, "pi")


def _run_codex_trusted(home: Path, repo: Path, prompt: str, fake_model: FakeModel, *,
                       harnesses: Harnesses) -> Any:
    # No --dangerously-bypass-hook-trust: the hooks run because the installer trusted them.
    return run_codex(home, repo, prompt, fake_model, harnesses=harnesses,
                     bypass_hook_trust=False)


def _claude_saw(fake_model: FakeModel, result: Any, s_mark: str, p_mark: str,
                home: Path) -> None:
    session = fake_model.requests_containing(s_mark)
    prompted = fake_model.requests_containing(p_mark)
    assert session, "session-start fact never reached the model\n" + hook_log(home)
    assert prompted, "prompt fact never reached the model\n" + hook_log(home)
    body = json.dumps(session[0].body)
    assert re.search(r"SessionStart hook additional context: \[factbank\][^\"]*" + s_mark, body)
    assert re.search(r"UserPromptSubmit hook additional context: \[factbank\][^\"]*" + p_mark,
                     json.dumps(prompted[0].body))


def _codex_saw(fake_model: FakeModel, result: Any, s_mark: str, p_mark: str,
               home: Path) -> None:
    for marker in (s_mark, p_mark):
        found = fake_model.requests_containing(marker)
        assert found, f"{marker} never reached the model\n{result.describe()}\n" + \
            hook_log(home)
        assert any(item.get("role") == "developer" and marker in json.dumps(item)
                   for item in found[0].body["input"])


def _pi_saw(fake_model: FakeModel, result: Any, s_mark: str, p_mark: str, home: Path) -> None:
    gen = fake_model.generation_requests("chat")
    assert gen, result.describe()
    first = gen[0].body
    for marker in (s_mark, p_mark):
        assert any(m["role"] == "user" and marker in json.dumps(m, ensure_ascii=False)
                   for m in first["messages"]), f"{marker} not in Pi's first request"
    assert {"factbank_search", "factbank_add", "factbank_confirm", "factbank_dispute",
            "factbank_supersede"} <= set(tool_names(first))


@pytest.mark.parametrize(("install_for", "run", "saw", "remote", "project", "tag"), [
    pytest.param(_install_claude, run_claude, _claude_saw, "git@github.com:acme/claude-e2e.git",
                 "github.com/acme/claude-e2e", "CLAUDE1", id="claude"),
    pytest.param(_install_codex_trusted, _run_codex_trusted, _codex_saw,
                 "https://github.com/acme/codex-e2e.git", "github.com/acme/codex-e2e", "CODEX1",
                 id="codex-trusted-hooks"),
    pytest.param(_install_pi, run_pi, _pi_saw, "git@github.com:acme/pi-e2e.git",
                 "github.com/acme/pi-e2e", "PI1", id="pi"),
])
def test_session_and_prompt_facts_reach_the_model(
    install_for: Callable[..., None], run: Callable[..., Any], saw: Callable[..., None],
    remote: str, project: str, tag: str, harnesses: Harnesses, fake_model: FakeModel,
    harness_home: Path, tmp_path: Path, services: Services,
) -> None:
    services.require_inject()
    repo = make_repo(tmp_path, "repo", remote)
    s_mark, p_mark, prompt = seed_facts(services, tag, project)
    login(harness_home, services)
    install_for(harness_home, fake_model, harnesses)

    result = run(harness_home, repo, prompt, fake_model, harnesses=harnesses)
    assert_ok(result, harness_home)
    saw(fake_model, result, s_mark, p_mark, harness_home)


def test_pi_tools_add_and_search(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    repo = make_repo(tmp_path, "pi-tools", "git@github.com:acme/pi-tools.git")
    login(harness_home, services)
    install(harness_home, "pi")
    fact = {"content": "The pi-tools service keeps its cache in /var/cache/FBPITOOL1.",
            "category": "environment", "source_kind": "user", "source_location": "",
            "quote": "cache lives in /var/cache/FBPITOOL1", "origin": "user",
            "tags": ["cache", "缓存", "FBPITOOL1"]}
    fake_model.script(ToolCall("factbank_add", fact), Text("saved"))
    result = run_pi(harness_home, repo, "remember where the cache is", fake_model,
                    harnesses=harnesses)
    assert_ok(result, harness_home)
    stored = [f for f in services.facts(category="environment")
              if "FBPITOOL1" in f["content"]]
    assert len(stored) == 1, result.describe()
    assert stored[0]["project"] == "github.com/acme/pi-tools"
    assert stored[0]["created_by"]["agent"] == "pi"
    tool_msgs = [m for m in fake_model.generation_requests("chat")[-1].body["messages"]
                 if m["role"] == "tool"]
    assert tool_msgs and f"#{stored[0]['id']}" in json.dumps(tool_msgs[-1])

    fake_model.script(ToolCall("factbank_search", {"query": "where is the FBPITOOL1 cache"}),
                      Text("found"))
    result = run_pi(harness_home, repo, "where is the cache?", fake_model, harnesses=harnesses)
    assert_ok(result, harness_home)
    last = fake_model.generation_requests("chat")[-1].body["messages"]
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert any(f"#{stored[0]['id']}" in json.dumps(m) for m in tool_msgs), tool_msgs


# --- the product: Codex saves, Claude Code recalls (same repository only) ----------------------


def test_fact_saved_by_codex_reaches_next_claude_session_in_same_repo_only(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    services.require_inject()
    repo_a = make_repo(tmp_path, "api", "git@github.com:acme/e2e-api.git")
    repo_b = make_repo(tmp_path, "web", "git@github.com:acme/e2e-web.git")
    install_all_for_codex_to_claude(harness_home, services, fake_model, harnesses)

    marker = "FBE2E-7Q4"
    fact = {"content": f"The e2e-api repository runs its tests with `make test-{marker}`.",
            "category": "project", "source_kind": "user", "source_location": "",
            "quote": f"run make test-{marker}", "origin": "user",
            "tags": ["tests", "测试", "make", marker]}
    fake_model.script(ToolCall("mcp__factbank__add", fact, text="Saving that."),
                      Text("Saved it."))
    result = run_codex(harness_home, repo_a, "Remember: tests run with make test.", fake_model,
                       harnesses=harnesses, bypass_hook_trust=False)
    assert_ok(result, harness_home)
    gen = fake_model.generation_requests("responses")
    assert "mcp__factbank__add" in tool_names(gen[0].body), result.describe()
    saved = [f for f in services.facts(category="project") if marker in f["content"]]
    assert len(saved) == 1, result.describe()
    assert saved[0]["project"] == "github.com/acme/e2e-api"
    assert saved[0]["created_by"]["agent"] == "codex"
    outputs = [i for i in gen[-1].body["input"] if i.get("type") == "function_call_output"]
    assert outputs and f"fact #{saved[0]['id']}" in json.dumps(outputs[-1])

    # The next Claude Code session in the same repository sees it at session start ...
    before = len(fake_model.requests)
    result = run_claude(harness_home, repo_a, "What should I know before I start?", fake_model,
                        harnesses=harnesses)
    assert_ok(result, harness_home)
    claude_a = [r for r in fake_model.requests[before:] if r.api == "anthropic"]
    assert any(marker in r.dumps() for r in claude_a), hook_log(harness_home)

    # ... and a session in another repository (another project key) does not.
    before = len(fake_model.requests)
    result = run_claude(harness_home, repo_b, "What should I know before I start?", fake_model,
                        harnesses=harnesses)
    assert_ok(result, harness_home)
    claude_b = [r for r in fake_model.requests[before:] if r.api == "anthropic"]
    assert claude_b and not any(marker in r.dumps() for r in claude_b)


def test_fact_saved_by_codex_with_questions_is_found_by_a_claude_prompt_sharing_no_word(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    """docs/principles.md#the-writer-asks-the-questions end to end: Codex's model saves an English
    fact with writer questions
    through the MCP `add` tool; a Claude Code prompt in Chinese that shares no word with the
    fact (content, tags or quote) gets it injected, matched through a stored question. A
    global gotcha is not injected at session start, so only the prompt can recall it."""
    services.require_inject()
    repo = make_repo(tmp_path, "billing", "git@github.com:acme/e2e-billing.git")
    install_all_for_codex_to_claude(harness_home, services, fake_model, harnesses)

    marker = "FBQ-3X9"
    questions = ["Which cache port does the billing service use in staging?",
                 "账单服务预发环境的缓存开在哪个端口？"]
    fact = {"content": f"ledgerline's staging Redis listens on 6380 ({marker}), not 6379.",
            "category": "gotchas", "source_kind": "user", "source_location": "",
            "quote": "staging redis is on 6380", "origin": "user", "project": "",
            "tags": ["ledgerline", "redis", "staging"], "questions": questions}
    prompt = "计费系统在测试环境里的缓存用的是几号端口？"
    fact_words = {w.lower() for w in re.findall(r"\w+", json.dumps(
        {k: fact[k] for k in ("content", "quote", "tags")}, ensure_ascii=False))}
    assert not fact_words & {w.lower() for w in re.findall(r"\w+", prompt)}

    fake_model.script(ToolCall("mcp__factbank__add", fact, text="Saving that."),
                      Text("Saved it."))
    result = run_codex(harness_home, repo, "Remember the staging Redis port.", fake_model,
                       harnesses=harnesses, bypass_hook_trust=False)
    assert_ok(result, harness_home)
    gen = fake_model.generation_requests("responses")
    # The model was offered factbank's add tool with the request for bilingual questions.
    assert "mcp__factbank__add" in tool_names(gen[0].body), result.describe()
    assert "2-4 questions a later teammate would type" in gen[0].dumps()
    saved = [f for f in services.facts(category="gotchas") if marker in f["content"]]
    assert len(saved) == 1, result.describe()
    assert saved[0]["questions"] == questions and saved[0]["created_by"]["agent"] == "codex"

    # The recall service matches the prompt through a question, not the fact's own words.
    r = httpx.post(f"{services.recall}/v1/search", headers=services.headers(), timeout=60,
                   json={"query": prompt})
    top = r.json()["results"][0]
    assert top["fact"]["id"] == saved[0]["id"] and top["match"].startswith("question: "), top

    before = len(fake_model.requests)
    result = run_claude(harness_home, repo, prompt, fake_model, harnesses=harnesses)
    assert_ok(result, harness_home)
    claude = [r for r in fake_model.requests[before:] if r.api == "anthropic"]
    contexts = [text[i:i + 1500] for text in (r.dumps() for r in claude)
                for i in [m.start() for m in re.finditer(
                    r"UserPromptSubmit hook additional context: \[factbank\]", text)]]
    assert any(marker in c for c in contexts), hook_log(harness_home) or [
        t[max(0, t.find(marker) - 300):t.find(marker) + 100] for t in (r.dumps() for r in claude)
        if marker in t]
    assert not any(marker in c for r in claude for c in re.findall(
        r"SessionStart hook additional context: .{0,1500}", r.dumps()))


# --- the Stop reminder: once after 5 prompts, never a loop -------------------------------------


def reminder_requests(fake: FakeModel, since: int) -> list[Any]:
    return [r for r in fake.requests[since:] if r.api is not None
            and "factbank reminder" in r.dumps()]


def _next_claude_prompt(home: Path, repo: Path, prompt: str, fake_model: FakeModel, *,
                        harnesses: Harnesses, first: bool) -> Any:
    return run_claude(home, repo, prompt, fake_model, harnesses=harnesses,
                      extra_args=[] if first else ["--continue"])


def _next_codex_prompt(home: Path, repo: Path, prompt: str, fake_model: FakeModel, *,
                       harnesses: Harnesses, first: bool) -> Any:
    if first:
        return run_codex(home, repo, prompt, fake_model, harnesses=harnesses)
    return run_codex(home, repo, prompt, fake_model, harnesses=harnesses,
                     extra_args=["resume", "--last"])


def _claude_turns(fake_model: FakeModel, since: int) -> list[Any]:
    return [r for r in fake_model.requests[since:] if r.api == "anthropic"
            and r.body.get("tools")]


def _codex_turns(fake_model: FakeModel, since: int) -> list[Any]:
    return [r for r in fake_model.requests[since:] if r.api == "responses"]


@pytest.mark.parametrize(("harness", "next_prompt", "turns"), [
    pytest.param("claude", _next_claude_prompt, _claude_turns, id="claude"),
    pytest.param("codex", _next_codex_prompt, _codex_turns, id="codex"),
])
def test_stop_reminds_once_after_five_prompts(
    harness: str, next_prompt: Callable[..., Any], turns: Callable[..., list[Any]],
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    repo = make_repo(tmp_path, f"stop-{harness}", f"git@github.com:acme/stop-{harness}.git")
    login(harness_home, services)
    install(harness_home, harness)
    for n in range(1, 6):
        before = len(fake_model.requests)
        result = next_prompt(harness_home, repo, f"prompt number {n}", fake_model,
                             harnesses=harnesses, first=n == 1)
        assert_ok(result, harness_home)
        gen = turns(fake_model, before)
        reminded = reminder_requests(fake_model, before)
        if n < 5:
            assert not reminded, f"reminded after {n} prompts"
        else:
            # One reminder: the turn continued once with it, then stopped (no loop).
            assert len(reminded) == 1 and len(gen) == 2, result.describe()
