"""Timeline events as the hooks post them, for the timeline integration tests: the project,
timestamps, one event, and a POST of a batch."""

from __future__ import annotations

from datetime import datetime

from tests.integration.cli_env import env as cli_env  # noqa: F401 (the env fixture)
from tests.integration.conftest import auth

PROJECT = "github.com/acme/api"


def ev(session: str, kind: str = "file", **over) -> dict:
    body = {"session_id": session, "kind": kind, "project": PROJECT}
    body.update(over)
    return body


async def post_events(stack, token, *events, status=201, agent=None):
    headers = auth(token)
    if agent:
        headers["X-Factbank-Agent"] = agent
    r = await stack.ingest.post("/v1/timeline/events", json={"events": list(events)},
                                headers=headers)
    assert r.status_code == status, r.text
    return r.json()


def iso(dt: datetime) -> str:
    return dt.isoformat()
