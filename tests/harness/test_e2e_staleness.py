"""Staleness for real: a fact Codex saves from a file, the file changed by a commit, and the
next Claude Code session starting with the fact marked stale and not injected.

The real services (the session's `factbank up`, a bank of this module's own), the real
installer (`factbank install all --trust` and `factbank install git`), the real Codex and
Claude Code binaries against the fake model, a real git repository. Nobody runs `factbank
verify` by hand: the post-commit hook `install git` added runs it in the background.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .e2e import (
    Services,
    assert_ok,
    factbank,
    git,
    hook_log,
    install_all_for_codex_to_claude,
    repository,
)
from .fake_model import FakeModel, Text, ToolCall, tool_names
from .npm import Harnesses
from .runners import run_claude, run_codex

pytestmark = pytest.mark.harness


def test_a_fact_codex_saved_from_a_file_turns_stale_at_a_commit_and_claude_is_told(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    services.require_inject()
    repo = repository(tmp_path / "api", "git@github.com:acme/stale-e2e.git",
                      {"deploy/app.yaml": "name: api\nserver:\n  port: 8443\n  tls: true\n"},
                      home=harness_home)
    install_all_for_codex_to_claude(harness_home, services, fake_model, harnesses)
    out = factbank(harness_home, "install", "git", cwd=repo, timeout=60)
    assert out.returncode == 0 and "created" in out.stdout, out.stdout + out.stderr

    # Codex saves a fact from the file through factbank's MCP add tool.
    marker = "FBSTALE-3K8"
    fact = {"content": f"The api service listens on port 8443 ({marker}).",
            "category": "project", "source_kind": "file",
            "source_location": "deploy/app.yaml:3", "quote": "port: 8443",
            "origin": "verified", "tags": ["port", "端口", "api", marker]}
    fake_model.script(ToolCall("mcp__factbank__add", fact, text="Saving that."),
                      Text("Saved it."))
    result = run_codex(harness_home, repo, "Remember which port the api listens on.",
                       fake_model, harnesses=harnesses, bypass_hook_trust=False)
    assert_ok(result, harness_home)
    gen = fake_model.generation_requests("responses")
    assert "mcp__factbank__add" in tool_names(gen[0].body), result.describe()
    saved = [f for f in services.facts(project="github.com/acme/stale-e2e")
             if marker in f["content"]]
    assert len(saved) == 1, result.describe()
    fid = saved[0]["id"]
    assert saved[0]["created_by"]["agent"] == "codex"
    assert saved[0]["source"] == {"kind": "file", "location": "deploy/app.yaml:3"}
    fp = saved[0]["fingerprint"]
    assert fp["path"] == "deploy/app.yaml" and fp["line"] == 3 and fp["dirty"] is False
    assert fp["commit"] == git(repo, "rev-parse", "HEAD", home=harness_home)
    assert fp["file_blob"] == git(repo, "hash-object", "deploy/app.yaml", home=harness_home)

    # A commit changes the quoted line; the post-commit hook's background verify notices.
    (repo / "deploy" / "app.yaml").write_text("name: api\nserver:\n  port: 9443\n  tls: true\n")
    git(repo, "commit", "-q", "-am", "api moves to 9443", home=harness_home)
    log = harness_home / ".cache" / "factbank" / "verify.log"
    deadline = time.monotonic() + 60
    status = saved[0]["status"]
    while time.monotonic() < deadline and status != "stale":
        time.sleep(0.1)
        status = next(f["status"] for f in services.facts(
            project="github.com/acme/stale-e2e", statuses="active,stale") if f["id"] == fid)
    assert status == "stale", (log.read_text() if log.exists() else "no verify.log") + \
        hook_log(harness_home)
    assert f"(stale: #{fid})" in log.read_text()

    # The next Claude Code session starts with the fact named stale, and not injected.
    before = len(fake_model.requests)
    result = run_claude(harness_home, repo, "Which port does the api listen on?", fake_model,
                        harnesses=harnesses)
    assert_ok(result, harness_home)
    claude = [r for r in fake_model.requests[before:] if r.api == "anthropic"]
    assert claude, result.describe()
    seen = "\n".join(r.dumps() for r in claude)
    assert "Turned stale since your last session" in seen, hook_log(harness_home)
    assert f"#{fid} stale: the quote changed at deploy/app.yaml:3: now" in seen
    assert marker not in seen  # neither the session block nor the prompt block injected it
    assert json.dumps(fact["content"])[1:-1] not in seen
