"""The recording hooks (issue 15), run as the harnesses run them: a subprocess reading JSON on
stdin, against a stand-in service on loopback. A file or command event is buffered locally and
sent within a short budget; a service that is down costs nothing and loses nothing (within the
bound); conflicts come back as PostToolUse additional context (valid for Codex's schema)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from factbank.runtime.runner import free_port
from factbank_client import hooks

SHARED_DIR = Path(
    os.environ.get("FACTBANK_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared"
)
SCHEMA = SHARED_DIR / "hook-schemas" / "codex" / "post-tool-use.command.output.schema.json"
HOOK = [sys.executable, "-I", "-S",
        str(Path(__file__).resolve().parents[2] / "clients/factbank_client/hooks.py")]


class Service:
    """Stand-in ingest + recall: records every POST; answers timeline events with the
    conflicts in `self.conflicts`, inject with an empty block."""

    def __init__(self, port: int = 0) -> None:
        self.posts: list[dict[str, Any]] = []
        self.conflicts: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.posts.append({"path": self.path, "body": body,
                                    "token": self.headers.get("Authorization")})
                if self.path == "/v1/timeline/events":
                    answer = {"recorded": len(body["events"]), "conflicts": outer.conflicts}
                else:
                    answer = {"text": "", "facts": [], "tokens": 0}
                data = json.dumps(answer).encode()
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[dict]:
        return [e for p in self.posts if p["path"] == "/v1/timeline/events"
                for e in p["body"]["events"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Env:
    def __init__(self, root: Path, port: int) -> None:
        self.home = root / "home"
        self.repo = root / "repo"
        (self.repo / ".git").mkdir(parents=True)
        (self.repo / ".git" / "config").write_text(
            '[remote "origin"]\n\turl = git@github.com:Acme/Widgets.git\n')
        (self.repo / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
        (self.repo / "src").mkdir()
        cfg = self.home / ".config" / "factbank" / "config.toml"
        cfg.parent.mkdir(parents=True)
        cfg.write_text(f'url = "http://127.0.0.1:{port}"\n'
                       f'recall_url = "http://127.0.0.1:{port}"\n'
                       '[banks.personal]\ntoken = "tok-personal"\n')
        self.cache = self.home / ".cache" / "factbank"

    def run(self, event: str, data: dict) -> tuple[int, str, float]:
        start = time.monotonic()
        proc = subprocess.run(
            [*HOOK, event], input=json.dumps(data).encode(), capture_output=True,
            cwd=self.repo, timeout=10,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                 "LANG": "C.UTF-8", "CLAUDECODE": "1"})
        assert proc.stderr == b""
        return proc.returncode, proc.stdout.decode(), time.monotonic() - start

    def edit(self, path: str, sid: str = "sess-1") -> dict:
        return {"session_id": sid, "cwd": str(self.repo), "hook_event_name": "PostToolUse",
                "tool_name": "Edit", "tool_input": {"file_path": path, "old_string": "a",
                                                    "new_string": "b"},
                "tool_response": {"filePath": path}, "transcript_path": None}

    def bash(self, command: str, sid: str = "sess-1", code: int | None = None) -> dict:
        response: dict = {"stdout": "", "stderr": ""}
        if code is not None:
            response["exit_code"] = code
        return {"session_id": sid, "cwd": str(self.repo / "src"),
                "hook_event_name": "PostToolUse", "tool_name": "Bash",
                "tool_input": {"command": command}, "tool_response": response}


@pytest.fixture
def service() -> Iterator[Service]:
    s = Service()
    yield s
    s.close()


def test_an_edit_is_recorded_relative_to_the_repo_root(tmp_path, service):
    env = Env(tmp_path, service.port)
    code, out, _ = env.run("post-tool-use", env.edit(str(env.repo / "src" / "app.py")))
    assert code == 0 and out == ""  # no conflict: nothing printed
    (event,) = service.events()
    assert event["kind"] == "file" and event["path"] == "src/app.py"
    assert event["tool"] == "Edit" and event["agent"] == "claude"
    assert event["project"] == "github.com/acme/widgets" and event["session_id"] == "sess-1"
    assert event["at"].endswith("+00:00")
    assert service.posts[0]["token"] == "Bearer tok-personal"
    assert not (env.cache / "timeline-buffer.jsonl").exists()
    assert not (env.cache / "timeline-buffer.jsonl.sending").exists()


def test_a_command_is_recorded_with_its_exit_code(tmp_path, service):
    env = Env(tmp_path, service.port)
    env.run("post-tool-use", env.bash("pytest -q", code=1))
    env.run("post-tool-use", env.bash("ls"))
    first, second = service.events()
    assert first["kind"] == "command" and first["command"] == "pytest -q"
    assert first["exit_code"] == 1 and "exit_code" not in second


def test_a_conflict_is_told_at_once_in_additional_context(tmp_path, service):
    env = Env(tmp_path, service.port)
    warning = ("src/app.py was also touched by bob with codex on desk 3 min ago "
               "(a DIFFERENT branch: main)")
    service.conflicts = [{"path": "src/app.py", "warning": warning}]
    code, out, _ = env.run("PostToolUse", env.edit("src/app.py"))
    assert code == 0
    obj = json.loads(out)
    if SCHEMA.exists():
        jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(obj)
    assert obj["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert warning in obj["hookSpecificOutput"]["additionalContext"]


def test_service_down_buffers_and_a_later_event_sends_everything(tmp_path):
    port = free_port()
    env = Env(tmp_path, port)
    for i in range(3):
        code, out, took = env.run("post-tool-use", env.edit(f"src/m{i}.py"))
        assert code == 0 and out == "" and took < 2
    buffered = env.cache / "timeline-buffer.jsonl.sending"
    assert len(buffered.read_text().splitlines()) == 3
    assert buffered.stat().st_mode & 0o777 == 0o600
    assert "kept for later" in (env.cache / "hooks.log").read_text()
    service = Service(port)
    try:
        env.run("post-tool-use", env.edit("src/m3.py"))
        assert [e["path"] for e in service.events()] == [f"src/m{i}.py" for i in range(4)]
        assert not buffered.exists()
    finally:
        service.close()


def test_the_buffer_is_bounded_and_says_what_it_dropped(tmp_path):
    env = Env(tmp_path, free_port())
    env.cache.mkdir(parents=True)
    line = json.dumps({"session_id": "old", "kind": "file", "path": "x.py"})
    (env.cache / "timeline-buffer.jsonl.sending").write_text((line + "\n") * 2100)
    env.run("post-tool-use", env.edit("src/new.py"))
    kept = (env.cache / "timeline-buffer.jsonl.sending").read_text().splitlines()
    assert len(kept) == hooks.MAX_BUFFER_LINES
    assert json.loads(kept[-1])["path"] == "src/new.py"  # the newest are kept
    assert "dropped the oldest 101" in (env.cache / "hooks.log").read_text()


def test_session_start_is_recorded_before_the_block_is_asked_for(tmp_path, service):
    env = Env(tmp_path, service.port)
    data = {"session_id": "sess-9", "cwd": str(env.repo / "src"),
            "hook_event_name": "SessionStart", "source": "startup", "transcript_path": None}
    code, _, _ = env.run("session-start", data)
    assert code == 0
    assert [p["path"] for p in service.posts] == ["/v1/timeline/events", "/v1/inject"]
    (event,) = service.events()
    assert event["kind"] == "session_start" and event["branch"] == "feature/x"
    assert event["cwd"] == "src" and event["machine"]
    env.run("session-end", {**data, "hook_event_name": "SessionEnd"})
    assert service.events()[-1]["kind"] == "session_end"


def test_other_tools_record_nothing(tmp_path, service):
    env = Env(tmp_path, service.port)
    data = {**env.edit("a.py"), "tool_name": "Read", "tool_input": {"file_path": "a.py"}}
    code, out, _ = env.run("post-tool-use", data)
    assert code == 0 and out == "" and service.posts == []


def test_a_patch_names_its_files():
    patch = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n"
             "*** Add File: docs/new.md\n+x\n*** End Patch\n")
    assert hooks._patch_paths({"input": patch}) == ["src/app.py", "docs/new.md"]
    assert hooks._patch_paths(patch) == ["src/app.py", "docs/new.md"]
    assert hooks._patch_paths({"other": 1}) == []


def test_post_tool_use_wall_time(tmp_path, service):
    env = Env(tmp_path, service.port)
    times = [env.run("post-tool-use", env.edit(f"src/t{i}.py"))[2] for i in range(9)]
    p50 = statistics.median(times)
    print(f"PostToolUse hook wall time p50 {p50 * 1000:.0f} ms")
    assert p50 < 0.5  # the target is 50 ms; a loaded CI box gets slack here
