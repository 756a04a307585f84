"""`factbank import-history` against the real services: the events land on the timeline
(redacted), a second run adds nothing, nor does a run after the hooks recorded the same tool
calls, and a dry run sends nothing. (The real harnesses' own files: tests/harness.)"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta

from factbank_client.client import Client
from factbank_client.hook import record as hookrecord
from tests.integration.cli_env import env as cli_env  # noqa: F401 (the env fixture)
from tests.integration.cli_env import login, ok, ok_json
from tests.unit.history_lines import claude_lines, write

SECRET = "ghp_R7mK2xQ9vL4pT8wN3jH6sD1fG5aZ0cB4yE2u"


def transcript(home, repo, sid: str, hours_ago: int = 1):
    hour = (datetime.now(UTC) - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H")
    lines = claude_lines(repo, hour, sid)
    for line in lines:  # a secret in a command line: redacted by the server
        for item in (line.get("message") or {}).get("content") or []:
            if isinstance(item, dict) and item.get("name") == "Bash" \
                    and item["input"]["command"] == "ls":
                item["input"]["command"] = f"GH_TOKEN={SECRET} gh pr list"
    return write(home / ".claude" / "projects" / "-repo" / f"{sid}.jsonl", lines)


def test_import_history_is_idempotent_and_redacted(cli_env, capsys, tmp_path):  # noqa: F811
    login(capsys, cli_env)
    home = tmp_path / "home"
    (cli_env.repo / "src").mkdir(exist_ok=True)
    transcript(home, cli_env.repo, "cc-1")
    args = ("import-history", "claude", "--dir", str(home / ".claude"))

    dry = ok(capsys, *args, "--dry-run")
    assert "1 sessions, 6 events" in dry and "github.com/acme/api: 1 session" in dry
    assert "dry run: nothing sent" in dry
    with Client(cli_env.config()) as client:
        assert client.timeline(project=cli_env.project) == []

    first = ok_json(capsys, *args)
    assert (first["recorded"], first["duplicates"], first["sessions"]) == (6, 0, 1)
    assert first["kinds"] == {"session_start": 1, "file": 2, "command": 2, "session_end": 1}
    with Client(cli_env.config()) as client:
        events = client.timeline(project=cli_env.project)
    assert sorted((e["kind"], e.get("path") or e.get("command", "")) for e in events
                  if e["kind"] in ("file", "command")) == [
        ("command", "GH_TOKEN=[REDACTED:github_token] gh pr list"),
        ("command", "cd src && pytest -q"),
        ("file", "docs/notes.md"), ("file", "src/app.py")]
    assert next(e for e in events if e.get("command") == "cd src && pytest -q"
                )["exit_code"] == 1
    assert SECRET not in json.dumps(events)
    assert {e["agent"] for e in events} == {"claude"}

    again = ok_json(capsys, *args)
    assert (again["recorded"], again["duplicates"]) == (0, 6)
    text = ok(capsys, *args)
    assert "0 added, 6 already on the timeline" in text
    with Client(cli_env.config()) as client:
        assert len(client.timeline(project=cli_env.project)) == len(events)


def test_what_the_hooks_recorded_is_not_imported_again(
        cli_env, capsys, tmp_path, monkeypatch):  # noqa: F811
    """A hook records a tool call; importing the transcript that holds it skips it (the
    same key), and adds only what the hooks did not see."""
    login(capsys, cli_env)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CLAUDECODE", "1")
    home = tmp_path / "home"
    (cli_env.repo / "src").mkdir(exist_ok=True)
    transcript(home, cli_env.repo, "cc-2")
    hookrecord.process("PostToolUse", json.dumps({
        "session_id": "cc-2", "cwd": str(cli_env.repo), "hook_event_name": "PostToolUse",
        "tool_name": "Edit", "tool_use_id": "toolu_3", "transcript_path": None,
        "tool_input": {"file_path": str(cli_env.repo / "src" / "app.py")},
        "tool_response": {}}).encode())
    out = ok_json(capsys, "import-history", "claude", "--dir", str(home / ".claude"))
    assert (out["recorded"], out["duplicates"]) == (5, 1)


def test_since_leaves_older_sessions_out(cli_env, capsys, tmp_path):  # noqa: F811
    login(capsys, cli_env)
    home = tmp_path / "home"
    old = transcript(home, cli_env.repo, "cc-old", hours_ago=50)
    transcript(home, cli_env.repo, "cc-new", hours_ago=1)
    stamp = time.time() - 50 * 3600
    os.utime(old, (stamp, stamp))
    out = ok_json(capsys, "import-history", "claude", "--dir", str(home / ".claude"),
                  "--since", "1d", "--dry-run")
    assert (out["files"], out["sessions"]) == (1, 1)
