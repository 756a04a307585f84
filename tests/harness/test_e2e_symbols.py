"""A fact anchored to a function, for real: Codex saves it through factbank's MCP tool with a
symbol source (`src/net.py::RetryPolicy.backoff`); on a teammate's checkout of the same
project, an uncommitted edit of that function's body keeps the fact out of Claude Code's
next prompt, and the block says it is not holding here; lines inserted above the function
instead change nothing: the fact is injected. The bank is never told (the fact stays active).

The real services (the session's `factbank up`, a bank of this module's own), the real
installer, the real Codex and Claude Code binaries against the fake model, real git
checkouts.

The teammate's runs set FACTBANK_VERIFY=0: the background session-start `factbank verify`
judges the working tree (uncommitted edits included) and would tell the bank; that is the
post-commit verify's job, not this test's subject (docs/staleness.md, verify before inject).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .e2e import (
    Services,
    assert_ok,
    git,
    home_env,
    hook_log,
    install_all_for_codex_to_claude,
    repository,
)
from .fake_model import FakeModel, Text, ToolCall, tool_names
from .npm import Harnesses
from .runners import run_claude, run_codex

pytestmark = pytest.mark.harness

REMOTE = "git@github.com:acme/symbol-e2e.git"
PROJECT = "github.com/acme/symbol-e2e"
NET = '''"""Retries for the HTTP client."""


class RetryPolicy:
    def __init__(self, base: float = 0.5, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before `attempt` (0-based)."""
        delay = min(self.cap, self.base * 2 ** attempt)
        return delay
'''
QUOTE = "delay = min(self.cap, self.base * 2 ** attempt)"


def test_a_teammates_uncommitted_body_edit_keeps_a_symbol_fact_out_and_drift_does_not(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    services.require_inject()
    mine = repository(tmp_path / "mine", REMOTE, {"src/net.py": NET}, home=harness_home)
    install_all_for_codex_to_claude(harness_home, services, fake_model, harnesses)

    # The agent saves a fact anchored to the function, through factbank's MCP add tool.
    marker = "FBSYM-5R2"
    fact = {"content": f"RetryPolicy.backoff doubles the delay each attempt, capped at "
                       f"cap seconds ({marker}).",
            "category": "project", "source_kind": "file",
            "source_location": "src/net.py::RetryPolicy.backoff", "quote": QUOTE,
            "origin": "verified", "tags": ["retry", "backoff", "重试", marker],
            "questions": ["How long does the retry backoff wait between attempts?",
                          "重试退避每次等多久？"]}
    fake_model.script(ToolCall("mcp__factbank__add", fact, text="Saving that."),
                      Text("Saved it."))
    result = run_codex(harness_home, mine, "Remember how the retry backoff grows.",
                       fake_model, harnesses=harnesses, bypass_hook_trust=False)
    assert_ok(result, harness_home)
    gen = fake_model.generation_requests("responses")
    assert "mcp__factbank__add" in tool_names(gen[0].body), result.describe()
    saved = [f for f in services.facts(project=PROJECT) if marker in f["content"]]
    assert len(saved) == 1, result.describe() + hook_log(harness_home)
    fid = saved[0]["id"]
    assert saved[0]["source"] == {"kind": "file",
                                  "location": "src/net.py::RetryPolicy.backoff"}
    fp = saved[0]["fingerprint"]
    assert fp["symbol"] == "RetryPolicy.backoff" and len(fp["symbol_sha256"]) == 64
    assert (fp["path"], fp["line"], fp["lines"]) == ("src/net.py", 9, 4)

    # A teammate's checkout of the same project, with an uncommitted edit of the body.
    theirs = tmp_path / "theirs"
    subprocess.run(["git", "clone", "-q", str(mine), str(theirs)], check=True,
                   env=home_env(harness_home), capture_output=True)
    git(theirs, "remote", "set-url", "origin", REMOTE, home=harness_home)
    (theirs / "src" / "net.py").write_text(NET.replace("return delay\n",
                                                       "return delay / 2\n"))
    quiet = {"FACTBANK_VERIFY": "0"}

    def ask(repo: Path) -> str:
        """What Claude Code's next session sent the model. On this shared 2-core box a hook
        may give up at its deadline (it says so in hooks.log, and injects nothing): then the
        session is run again, at most twice; any other miss is a failure."""
        for _ in range(3):
            log_before = hook_log(harness_home)
            before = len(fake_model.requests)
            run = run_claude(harness_home, repo, "How long does the retry backoff wait "
                             "between attempts?", fake_model, harnesses=harnesses,
                             extra_env=quiet)
            assert_ok(run, harness_home)
            claude = [r for r in fake_model.requests[before:] if r.api == "anthropic"]
            assert claude, run.describe()
            if "gave up" not in hook_log(harness_home)[len(log_before):]:
                break
        return "\n".join(r.dumps() for r in claude)

    seen = ask(theirs)
    assert marker not in seen, hook_log(harness_home)  # neither block injected it
    assert "Not holding in this checkout" in seen, seen[-3000:] + hook_log(harness_home)
    assert f"#{fid}: RetryPolicy.backoff: its body changed (src/net.py:9-12) in this " \
           "working tree" in seen
    # The bank was not told: one member's uncommitted edit hides nothing from the others.
    assert [f["status"] for f in services.facts(project=PROJECT, statuses="active,stale")
            if f["id"] == fid] == ["active"]

    # Lines above the function instead (still uncommitted): nothing changes, it is injected.
    (theirs / "src" / "net.py").write_text("import os\nimport time\n\n# the retry helpers\n"
                                           + NET)
    seen = ask(theirs)
    assert marker in seen, hook_log(harness_home)
    assert "Not holding in this checkout" not in seen
