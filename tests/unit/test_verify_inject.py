"""Verify before inject (docs/staleness.md): the hooks check each block fact that quotes a file
of this project against the working tree as it is now, leave out what does not hold there and
name it, and tell the bank nothing.

`worktree.check` on a real git repository (an uncommitted edit, a revert, a line drift, a
missing, huge, binary or ignored file, a redacted quote, a source kind it does not judge),
then the real hook process (`python -I -S hooks.py`, as installed) against a stand-in recall
service that answers with a block and its `sources`: the edited fact is left out and named,
its id is sent back as `withheld` (so the bank does not count it as seen), it comes back after
the revert, and the only requests the hook makes are `/v1/inject` ones (no verdict, no stale
mark)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from factbank_client.staleness import fingerprint, worktree
from tests.conftest import git
from tests.unit.hook_standins import Bank, HookEnv

CONFIG = "deploy/api.yaml"
BODY = "service: api\nhost: 0.0.0.0\nport: 8080\nworkers: 4\n"


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "remote.origin.url", "git@github.com:acme/api.git")
    (repo / "deploy").mkdir()
    (repo / CONFIG).write_text(BODY)
    (repo / ".gitignore").write_text(".env\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "config")
    return repo


def fact_for(repo: Path, path: str, line: int, quote: str, fid: int = 7) -> dict:
    """A file fact as the bank hands it: source, quote and the fingerprint `add` recorded."""
    data = (repo / path).read_bytes()
    return {"id": fid, "source": {"kind": "file", "location": f"{path}:{line}"},
            "quote": quote,
            "fingerprint": fingerprint.build(data, path, line, line, repo)}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def test_an_uncommitted_edit_does_not_hold_and_a_revert_holds_again(repo: Path) -> None:
    fact = fact_for(repo, CONFIG, 3, "port: 8080")
    assert worktree.check(fact, repo)[0] == worktree.HOLDS  # unchanged: the blob matches
    (repo / CONFIG).write_text(BODY.replace("8080", "9090"))  # not committed, not staged
    state, why = worktree.check(fact, repo)
    assert state == worktree.NOT_HOLDING
    assert f"{CONFIG}:3" in why and "working tree" in why
    git(repo, "checkout", "--", CONFIG)
    assert worktree.check(fact, repo)[0] == worktree.HOLDS


def test_line_drift_and_another_branch(repo: Path) -> None:
    fact = fact_for(repo, CONFIG, 3, "port: 8080")
    (repo / CONFIG).write_text("# a comment\n\n" + BODY.replace("port: 8080", "port:   8080"))
    assert worktree.check(fact, repo) == (worktree.HOLDS, f"the quote is in {CONFIG}")
    git(repo, "checkout", "-q", "--", CONFIG)
    # The current branch is what counts: on a branch that changed the line, it does not hold.
    git(repo, "checkout", "-q", "-b", "side")
    (repo / CONFIG).write_text(BODY.replace("8080", "8081"))
    git(repo, "commit", "-q", "-am", "port 8081")
    assert worktree.check(fact, repo)[0] == worktree.NOT_HOLDING
    git(repo, "checkout", "-q", "main")
    assert worktree.check(fact, repo)[0] == worktree.HOLDS


def test_what_this_checkout_cannot_judge_is_unknown(repo: Path) -> None:
    fact = fact_for(repo, CONFIG, 3, "port: 8080")
    gone = {**fact, "source": {"kind": "file", "location": "deploy/gone.yaml:3"},
            "fingerprint": {**fact["fingerprint"], "path": "deploy/gone.yaml"}}
    assert worktree.check(gone, repo) == (worktree.UNKNOWN,
                                          "deploy/gone.yaml is not in this checkout")
    huge = repo / "big.log"
    with huge.open("wb") as fh:
        fh.write(b"port: 8080\n" * ((worktree.HOOK_LIMIT // 11) + 10))
    big = {**fact, "source": {"kind": "file", "location": "big.log:1"},
           "fingerprint": {**fact["fingerprint"], "path": "big.log"}}
    state, why = worktree.check(big, repo)
    assert state == worktree.UNKNOWN and "larger than" in why
    (repo / "blob.bin").write_bytes(b"\0\1\2 port: 9090")
    binary = {**fact, "source": {"kind": "file", "location": "blob.bin"}, "fingerprint": None}
    assert worktree.check(binary, repo) == (worktree.UNKNOWN, "blob.bin is binary")
    (repo / ".env").write_text("PORT=9090\n")  # this machine's own file: not evidence
    env = {**fact, "source": {"kind": "file", "location": ".env:1"}, "quote": "PORT=8080",
           "fingerprint": None}
    assert worktree.check(env, repo)[0] == worktree.UNKNOWN
    outside = {**fact, "source": {"kind": "file", "location": "../../etc/passwd"},
               "fingerprint": None}
    assert worktree.check(outside, repo)[0] == worktree.UNKNOWN
    redacted = {**fact, "quote": "token: [REDACTED:api_key]"}
    (repo / CONFIG).write_text("nothing\n")
    assert worktree.check(redacted, repo)[0] == worktree.UNKNOWN
    assert worktree.check(fact, repo)[0] == worktree.NOT_HOLDING  # the control
    for kind in ("commit", "url", "user"):
        other = {**fact, "source": {"kind": kind, "location": "x"}}
        assert worktree.check(other, repo)[0] == worktree.UNKNOWN


def test_a_huge_file_costs_no_read(repo: Path) -> None:
    """A cited file far over the bound is refused by its size before any byte is read: the
    check of a 256 MiB sparse file stays under what reading 1 MiB costs, many times over."""
    huge = repo / "huge.bin"
    with huge.open("wb") as fh:
        fh.truncate(256 * 1024 * 1024)
    fact = {"id": 1, "source": {"kind": "file", "location": "huge.bin:1"}, "quote": "x"}
    started = time.process_time()
    for _ in range(20):
        assert worktree.check(fact, repo)[0] == worktree.UNKNOWN
    per_check = (time.process_time() - started) / 20
    assert per_check < 0.05, per_check  # reading 256 MiB would take seconds


def test_filter_block_leaves_out_and_names_only_the_facts_section(repo: Path) -> None:
    held = fact_for(repo, CONFIG, 2, "host: 0.0.0.0", fid=3)
    edited = fact_for(repo, CONFIG, 3, "port: 8080", fid=7)
    (repo / CONFIG).write_text(BODY.replace("8080", "9090"))
    text = ("[factbank] Remembered facts: context, not truth. (bank: personal)\n"
            "- #3 (trust 0.75, project [github.com/acme/api]) The API binds 0.0.0.0\n"
            "- #7 (trust 0.75, project [github.com/acme/api]) The API listens on 8080\n"
            "[factbank] Turned stale since your last session (not injected):\n"
            "- #7 something else named by id")
    out, left, kept = worktree.filter_block(text, [held, edited], repo)
    assert left == [7] and kept == [3]
    lines = out.split("\n")
    assert "listens on 8080" not in out and "binds 0.0.0.0" in out
    assert "- #7 something else named by id" in lines  # other sections are not filtered
    assert lines[-2] == worktree.NOTE_HEADER
    assert lines[-1].startswith("- #7: the quote is no longer at deploy/api.yaml:3")
    # Every fact left out: the facts header goes too, the note stays.
    out, left, _ = worktree.filter_block("\n".join(text.split("\n")[:1] + text.split("\n")[2:3]),
                                         [edited], repo)
    assert left == [7] and "Remembered facts" not in out and worktree.NOTE_HEADER in out
    # Nothing to check, or no repository: the text as it came.
    assert worktree.filter_block(text, [], repo) == (text, [], [])
    assert worktree.filter_block(text, [edited], None) == (text, [], [])


# --- the hook process -------------------------------------------------------------------------


@pytest.fixture
def bank() -> Iterator[Bank]:
    b = Bank()
    yield b
    b.close()


def context(hook: HookEnv, event: str, payload: dict, **env: str) -> str:
    """The additional context one hook run printed ("" for none); it must exit 0, silently."""
    code, out, err, _ = hook.run(event, payload, timeout=20, **env)
    assert code == 0 and err == ""
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""


def test_the_prompt_hook_leaves_out_what_the_working_tree_contradicts(
        tmp_path: Path, repo: Path, bank: Bank) -> None:
    hook = HookEnv(tmp_path, bank.url, {"personal": "tok"}, ingest_url=bank.url, repo=repo)
    port = fact_for(repo, CONFIG, 3, "port: 8080", fid=7)
    block = ("[factbank] Remembered facts: context, not truth. (bank: personal)\n"
             "- #7 (trust 0.75, project [github.com/acme/api]) The API listens on port 8080\n"
             "- #9 (trust 0.90, preferences) Use pnpm")
    bank.reply = {"text": block, "facts": [7, 9], "tokens": 30, "bank": "personal",
                  "sources": [port]}
    prompt = {"session_id": "s1", "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
              "prompt": "which port does the API use?"}

    assert context(hook, "user-prompt-submit", prompt) == block  # holds: as it came
    (repo / CONFIG).write_text(BODY.replace("8080", "9090"))  # a teammate's uncommitted edit
    shown = context(hook, "user-prompt-submit", prompt)
    assert "listens on port 8080" not in shown and "Use pnpm" in shown
    assert worktree.NOTE_HEADER in shown and "- #7: the quote is no longer at" in shown
    # The left-out id goes back with the next request, so the bank does not count it as seen.
    bank.reply = {"text": "", "facts": [], "tokens": 0, "bank": "personal"}
    context(hook, "user-prompt-submit", prompt)
    assert bank.requests[-1]["body"]["withheld"] == [7]
    # Reverted: the fact is shown again, and no longer withheld once shown.
    git(repo, "checkout", "--", CONFIG)
    bank.reply = {"text": block, "facts": [7, 9], "tokens": 30, "bank": "personal",
                  "sources": [port]}
    assert context(hook, "user-prompt-submit", prompt) == block
    context(hook, "user-prompt-submit", prompt)
    assert "withheld" not in bank.requests[-1]["body"]
    # The session-start block is checked the same way.
    (repo / CONFIG).write_text(BODY.replace("8080", "9090"))
    start = context(hook, "session-start",
                    {"session_id": "s2", "cwd": str(repo), "hook_event_name": "SessionStart",
                     "source": "startup"}, FACTBANK_TIMELINE="0", FACTBANK_VERIFY="0")
    assert "listens on port 8080" not in start and "- #7:" in start
    # Turned off: the block as it came.
    assert context(hook, "user-prompt-submit", prompt, FACTBANK_INJECT_CHECK="0") == block
    # The bank was told nothing: every request was a block request, none a verdict.
    assert {r["path"] for r in bank.requests} == {"/v1/inject"}
