"""The timeline for real: the real harnesses, their installed hooks and Pi
extension, against a real `factbank up` (the `services` fixture, tests/harness/conftest.py).

One repository (`main`) and a clone of it in another directory (same remote, branch
`feature/x`); one machine's HOME with `factbank install all`. The fake model scripts tool
calls, so each harness edits the file through its own edit tool:

1. Codex patches `src/app.py` (apply_patch through `exec_command`: Codex fires no hook for
   it; its hooks read the edit from the rollout).
2. Claude Code, in the clone, reads and edits the same file: the conflict reaches its model
   at its next hook (the PostToolUse of the next tool, here a `sleep`); it edits again and
   its next prompt block carries the conflict; Codex's next prompt block carries it too,
   naming Claude Code and the other branch.
3. Pi leaves a handoff through its `factbank_handoff` tool; the next Claude Code session's
   start block shows it, once.
4. `factbank import-history claude|codex|pi` over the transcripts these runs wrote adds
   nothing the hooks recorded, and a second run adds nothing at all.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until

from .e2e import Services, assert_ok, factbank, git, hook_log, install, login, repository
from .fake_model import FakeModel, Text, ToolCall
from .npm import Harnesses
from .runners import claude_settings_path, read_json, run_claude, run_codex, run_pi, write_json

pytestmark = pytest.mark.harness

REMOTE = "git@github.com:acme/tl-e2e.git"
PROJECT = "github.com/acme/tl-e2e"
CONFLICT = "[factbank] Possible edit conflict (timeline, not facts):"
PATCH = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-print('hello')\n"
         "+print('hello from codex')\n*** End Patch\n")


def repositories(root: Path) -> tuple[Path, Path]:
    repo, clone = repository(root / "repo", REMOTE), root / "clone"
    git(root, "clone", "-q", str(repo), str(clone))
    git(clone, "remote", "set-url", "origin", REMOTE)  # the same remote, another dir
    git(clone, "checkout", "-qb", "feature/x")
    return repo, clone


def timeline(svc: Services) -> list[dict]:
    return svc.timeline(PROJECT)


def settled(svc: Services) -> list[dict]:
    """The timeline once no event has arrived for 3 s (every hook child is done)."""
    last, since = None, time.monotonic()
    while time.monotonic() - since < 3:
        now = len(timeline(svc))
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.5)
    return timeline(svc)


def contexts(fake: FakeModel, since: int, label: str) -> list[str]:
    """The texts Claude Code injected with `label` ("PostToolUse", "UserPromptSubmit",
    "SessionStart") in the requests after `since`. Seen: `SessionStart hook additional
    context: ...`; a PostToolUse one comes in a <system-reminder> after the tool result, as
    `PostToolUse:Bash hook additional context: ...`."""
    out = []
    for r in fake.requests[since:]:
        if r.api != "anthropic":
            continue
        text = r.dumps()
        out += [text[m.start():m.start() + 2000] for m in
                re.finditer(rf"{label}(?::\w+)? hook additional context: ", text)]
    return out


def import_history(home: Path, harness: str) -> dict:
    proc = factbank(home, "import-history", harness, "--json", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_codex_then_claude_conflict_pi_handoff_and_backfill(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, tmp_path: Path,
    services: Services,
) -> None:
    services.require_inject()
    home = harness_home
    repo, clone = repositories(tmp_path)
    login(home, services)
    install(home, "claude", "codex", "pi")  # `all` takes only the harnesses present here
    settings = claude_settings_path(home)  # `claude -p` runs only tools it may run unasked
    conf = read_json(settings)
    conf.setdefault("permissions", {}).setdefault("allow", []).extend(["Read", "Edit", "Bash"])
    write_json(settings, conf)
    target = str(clone / "src" / "app.py")

    # 1. Codex edits src/app.py with its own apply_patch.
    fake_model.script(ToolCall("exec_command", {"cmd": f"apply_patch <<'EOF'\n{PATCH}EOF\n"}),
                      Text("Patched."))
    result = run_codex(home, repo, "Greet from codex.", fake_model, harnesses=harnesses,
                       extra_args=["--sandbox", "danger-full-access"])
    assert_ok(result, home)
    assert (repo / "src" / "app.py").read_text() == "print('hello from codex')\n"
    codex_edit = wait_until("Codex's edit on the timeline", lambda: [
        e for e in timeline(services) if e["kind"] == "file" and e["agent"] == "codex"])
    assert codex_edit[0]["path"] == "src/app.py" and codex_edit[0]["tool"] == "apply_patch"
    assert codex_edit[0]["branch"] == "main"
    codex_session = codex_edit[0]["session"]

    # 2. Claude Code, in the clone, edits the same file. It learns of the conflict at its
    #    next hook: the PostToolUse of the `sleep` that follows the edit.
    before = len(fake_model.requests)
    fake_model.script(ToolCall("Read", {"file_path": target}),
                      ToolCall("Edit", {"file_path": target, "old_string": "hello",
                                        "new_string": "hello from claude"}),
                      ToolCall("Bash", {"command": "sleep 4", "description": "wait"}),
                      Text("Edited."))
    result = run_claude(home, clone, "Greet from claude.", fake_model, harnesses=harnesses)
    assert_ok(result, home)
    assert (clone / "src" / "app.py").read_text() == "print('hello from claude')\n"
    told = [c for c in contexts(fake_model, before, "PostToolUse") if CONFLICT in c]
    assert told, "the conflict never reached Claude Code's model\n" + hook_log(home)
    assert re.search(r"src/app\.py was also touched by \w+ with codex on [^ ]+ \d+s ago "
                     r"\(a DIFFERENT branch: main\)", told[0]), told[0]

    # ... it edits again; its next prompt block carries the conflict.
    fake_model.script(ToolCall("Read", {"file_path": target}),
                      ToolCall("Edit", {"file_path": target, "old_string": "from claude",
                                        "new_string": "from claude again"}),
                      Text("Edited again."))
    result = run_claude(home, clone, "Once more.", fake_model, harnesses=harnesses,
                        extra_args=["--continue"])
    assert_ok(result, home)
    wait_until("the second conflict", lambda: len(
        [e for e in timeline(services) if e["kind"] == "conflict"]) == 2)
    wait_until("the warning left for Claude Code's next hook", lambda: any(
        p.suffix == ".pending" for p in (home / ".cache" / "factbank" / "sessions").iterdir()))
    before = len(fake_model.requests)
    result = run_claude(home, clone, "What changed?", fake_model, harnesses=harnesses,
                        extra_args=["--continue"])
    assert_ok(result, home)
    prompt = [c for c in contexts(fake_model, before, "UserPromptSubmit") if CONFLICT in c]
    assert prompt and "with codex" in prompt[0] and "DIFFERENT branch: main" in prompt[0], \
        contexts(fake_model, before, "UserPromptSubmit")

    # ... and the other session, Codex's, is told in its next prompt block.
    before = len(fake_model.requests)
    result = run_codex(home, repo, "Anything I should know?", fake_model, harnesses=harnesses,
                       extra_args=["--sandbox", "danger-full-access", "resume", "--last"])
    assert_ok(result, home)
    codex_told = [r for r in fake_model.requests[before:] if r.api == "responses"
                  and CONFLICT in r.dumps()]
    assert codex_told, result.describe() + hook_log(home)
    assert re.search(r"src/app\.py was also touched by \w+ with claude on [^ ]+ \d+s ago "
                     r"\(a DIFFERENT branch: feature/x\)", codex_told[0].dumps())
    events = timeline(services)
    claude_files = [e for e in events if e["kind"] == "file" and e["agent"] == "claude"]
    assert {e["branch"] for e in claude_files} == {"feature/x"} and len(claude_files) == 2
    assert any(e["kind"] == "command" and e.get("command") == "sleep 4"
               and e.get("exit_code") == 0 for e in events)
    assert {e["session"] for e in events if e["agent"] == "codex"} == {codex_session}

    # 3. Pi leaves a handoff; the next Claude Code session gets it at its start, once.
    note = "Greeting refactor half done: src/app.py prints twice, finish it (FBHANDOFF-7)"
    fake_model.script(ToolCall("factbank_handoff", {"text": note, "to_agent": "claude",
                                                    "files": ["src/app.py"]}),
                      Text("Left a note."))
    result = run_pi(home, repo, "Hand this over to Claude.", fake_model, harnesses=harnesses)
    assert_ok(result, home)
    tool_msgs = [m for m in fake_model.generation_requests("chat")[-1].body["messages"]
                 if m["role"] == "tool"]
    assert tool_msgs and "for claude in github.com/acme/tl-e2e" in json.dumps(tool_msgs)
    before = len(fake_model.requests)
    result = run_claude(home, clone, "Where do I start?", fake_model, harnesses=harnesses)
    assert_ok(result, home)
    start = [c for c in contexts(fake_model, before, "SessionStart") if "FBHANDOFF-7" in c]
    assert start and "Handoff #" in start[0] and "(pi)" in start[0], hook_log(home)
    assert "[src/app.py]" in start[0]
    before = len(fake_model.requests)
    result = run_claude(home, clone, "And now?", fake_model, harnesses=harnesses)
    assert_ok(result, home)
    assert not any("FBHANDOFF-7" in c for c in contexts(fake_model, before, "SessionStart"))

    # 4. The backfill reads the transcripts these runs wrote: nothing the hooks recorded is
    #    added again (the same keys), and a second run adds nothing.
    recorded = settled(services)
    counts = {}
    for harness in ("claude", "codex", "pi"):
        first = import_history(home, harness)
        assert first["events"] > 0 and first["recorded"] == 0, (harness, first)
        again = import_history(home, harness)
        assert again["recorded"] == 0 and again["duplicates"] == first["duplicates"]
        counts[harness] = first["kinds"]
    assert counts["claude"]["file"] == 2 and counts["claude"]["command"] == 1
    assert counts["claude"]["session_start"] == 3
    assert counts["codex"]["file"] == 1 and counts["codex"]["session_start"] == 1
    assert counts["pi"]["session_start"] == 1 and "file" not in counts["pi"]
    assert len(timeline(services)) == len(recorded)
