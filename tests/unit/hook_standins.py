"""The hook process as the installer registers it, and the loopback stand-ins of the factbank
services it talks to, for the hook tests (the `standin` fixture is in tests/unit/conftest.py).

`LoopbackService` is the one HTTP stand-in: a threaded server on 127.0.0.1 that waits
`delay` seconds, logs every POST (path, body, bearer token, agent header) and answers what
its subclass's `answer` returns. `StandIn` answers `/v1/inject` per token, `Bank` with one
reply and its `sources`, `Service` timeline events with the conflicts it is given.
`HookEnv` is a throwaway HOME with a factbank config and a repository as the hook's cwd.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import wait_until

SHARED_DIR = Path(
    os.environ.get("FACTBANK_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared"
)
SCHEMA_DIR = SHARED_DIR / "hook-schemas" / "codex"
KEBAB = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit",
         "Stop": "stop", "PostToolUse": "post-tool-use"}
HOOK_SCRIPT = str(Path(__file__).resolve().parents[2] / "clients/factbank_client/hooks.py")
HOOK = [sys.executable, "-I", "-S", HOOK_SCRIPT]  # exactly how the installer registers it


def codex_schema(event: str, kind: str) -> dict[str, Any]:
    path = SCHEMA_DIR / f"{KEBAB[event]}.command.{kind}.schema.json"
    if not path.exists():
        pytest.skip(f"Codex hook schema missing: {path}")
    return json.loads(path.read_text())


def validate(event: str, kind: str, obj: Any) -> None:
    jsonschema.Draft7Validator(codex_schema(event, kind)).validate(obj)


def parse(event: str, out: str) -> dict:
    """The hook's stdout: exactly one JSON document, valid for Codex's output schema."""
    assert out.strip(), "expected hook output"
    obj = json.loads(out)
    validate(event, "output", obj)
    return obj


def wait_for(cond: Callable[[], Any], timeout: float = 15.0) -> Any:
    """`cond()`'s first truthy value (the detached child works after the hook returned)."""
    return wait_until(repr(cond), cond, timeout)


# --- the stand-in services --------------------------------------------------------------------


class LoopbackService:
    """A threaded HTTP server on loopback (`port` 0: a free one) answering POSTs with
    `answer(path, body, token)` -> (status, JSON object), after `delay` seconds."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.delay = 0.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                if outer.delay:
                    time.sleep(outer.delay)
                outer.requests.append({"path": self.path, "token": token, "body": body,
                                       "agent": self.headers.get("X-Factbank-Agent")})
                status, answer = outer.answer(self.path, body, token)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, body: dict, token: str) -> tuple[int, dict]:
        raise NotImplementedError

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class StandIn(LoopbackService):
    """`POST /v1/inject` answering per token from `texts` (token -> text)."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        super().__init__()

    def answer(self, path: str, body: dict, token: str) -> tuple[int, dict]:
        if path != "/v1/inject":
            return 404, {"error": "not found"}
        text = self.texts.get(token, "")
        return 200, {"text": text, "facts": [1] if text else [], "tokens": len(text) // 4}


class Bank(LoopbackService):
    """`POST /v1/inject` answering `reply` (a block and its `sources`) to every request."""

    def __init__(self) -> None:
        self.reply: dict[str, Any] = {}
        super().__init__()

    def answer(self, path: str, body: dict, token: str) -> tuple[int, dict]:
        return (200 if path == "/v1/inject" else 404), self.reply


class Service(LoopbackService):
    """Stand-in ingest + recall: answers timeline events with the conflicts in `conflicts`
    (each given once), inject with an empty block."""

    def __init__(self, port: int = 0) -> None:
        self.conflicts: list[dict] = []
        super().__init__(port)

    def answer(self, path: str, body: dict, token: str) -> tuple[int, dict]:
        if path == "/v1/timeline/events":
            answer = {"recorded": len(body["events"]), "conflicts": self.conflicts}
            self.conflicts = []
            return 201, answer
        return 201, {"text": "", "facts": [], "tokens": 0}

    def events(self) -> list[dict]:
        return [e for p in list(self.requests) if p["path"] == "/v1/timeline/events"
                for e in p["body"]["events"]]


# --- running the hook -------------------------------------------------------------------------


class HookEnv:
    """A throwaway HOME with a factbank config naming `recall_url` (and `ingest_url`) and the
    banks' `tokens`, a repository as cwd (`repo`, else a bare `.git` whose origin is
    Acme/Widgets, on `branch` when given), and the hook."""

    def __init__(self, root: Path, recall_url: str, tokens: dict[str, str], *,
                 ingest_url: str = "http://127.0.0.1:1", repo: Path | None = None,
                 branch: str | None = None) -> None:
        self.home = root / "home"
        if repo is None:
            repo = root / "repo"
            (repo / ".git").mkdir(parents=True)
            (repo / ".git" / "config").write_text(
                '[remote "origin"]\n\turl = git@github.com:Acme/Widgets.git\n')
            if branch:
                (repo / ".git" / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
        self.repo = repo
        cfg = self.home / ".config" / "factbank" / "config.toml"
        cfg.parent.mkdir(parents=True)
        banks = "".join(f'[banks.{b}]\ntoken = "{t}"\n' for b, t in tokens.items())
        cfg.write_text(f'url = "{ingest_url}"\nrecall_url = "{recall_url}"\n{banks}')
        self.cache = self.home / ".cache" / "factbank"
        self.transcript = root / "transcript.jsonl"
        self.transcript.write_text("")

    @property
    def log(self) -> Path:
        return self.cache / "hooks.log"

    def env(self, **extra: str) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "LANG": "C.UTF-8"}
        env.update(extra)
        return env

    def run(self, event: str, stdin: bytes | str | dict, *, timeout: float = 10,
            **extra_env: str) -> tuple[int, str, str, float]:
        """(exit code, stdout, stderr, seconds) of one hook run."""
        data = json.dumps(stdin) if isinstance(stdin, dict) else stdin
        raw = data.encode() if isinstance(data, str) else data
        start = time.monotonic()
        proc = subprocess.run([*HOOK, event], input=raw, capture_output=True, cwd=self.repo,
                              env=self.env(**extra_env), timeout=timeout)
        return (proc.returncode, proc.stdout.decode(), proc.stderr.decode(),
                time.monotonic() - start)

    # Realistic Codex payloads (they validate against Codex's input schemas).
    def session_start(self, sid: str = "sess-1") -> dict:
        return {"session_id": sid, "transcript_path": str(self.transcript),
                "cwd": str(self.repo), "hook_event_name": "SessionStart",
                "model": "stub-model", "permission_mode": "bypassPermissions",
                "source": "startup"}

    def prompt(self, text: str, sid: str = "sess-1") -> dict:
        data = self.session_start(sid)
        del data["source"]
        return {**data, "hook_event_name": "UserPromptSubmit", "turn_id": "turn-1",
                "prompt": text}

    def stop(self, sid: str = "sess-1", active: bool = False) -> dict:
        data = self.session_start(sid)
        del data["source"]
        return {**data, "hook_event_name": "Stop", "turn_id": "turn-1",
                "stop_hook_active": active, "last_assistant_message": "done"}
