"""The timeline page and its live stream (server-sent events)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from litestar import Request, get
from litestar.response import ServerSentEvent, Template
from litestar.response.sse import ServerSentEventMessage

from factbank_client.dashboard.base import (
    POLL_SECONDS,
    Dash,
    dash_of,
    page,
    pick_bank,
    template_globals,
)
from factbank_client.errors import FactbankError


def _timeline(dash: Dash, bank: str, project: str | None, since: str | None = None
              ) -> list[dict]:
    return dash.client.timeline(project=project, since=since, limit=200, banks=[bank])


@get("/timeline", sync_to_thread=True)
def timeline_page(request: Request) -> Template:
    """The project's timeline (all projects by default), conflicts highlighted, the open
    handoffs beside it; new events stream in (`/timeline/stream`)."""
    dash = dash_of(request)
    bank = pick_bank(dash, request.query_params.get("bank"))
    project = (request.query_params.get("project") or "").strip() or None
    error = None
    events: list[dict] = []
    handoffs: list[dict] = []
    try:
        events = _timeline(dash, bank, project)
        handoffs = dash.client.handoffs(project=project, open_only=True, bank=bank)
    except FactbankError as exc:
        error = str(exc)
    projects = sorted({e["project"] for e in events if e.get("project")})
    conflicts = [e for e in events if e.get("kind") == "conflict"]
    return page(request, "timeline.html", bank=bank, project=project or "", events=events,
                handoffs=handoffs, conflicts=conflicts, projects=projects,
                timeline_error=error, newest=events[0]["at"] if events else "")


@get("/timeline/stream")
async def timeline_stream(request: Request) -> ServerSentEvent:
    """New timeline events as rendered rows (`event: rows`), polled every POLL_SECONDS."""
    dash = dash_of(request)
    bank = pick_bank(dash, request.query_params.get("bank"))
    project = (request.query_params.get("project") or "").strip() or None
    since = request.query_params.get("since") or None
    engine = request.app.template_engine
    row = engine.get_template("_event.html")

    async def events() -> AsyncIterator[ServerSentEventMessage]:
        nonlocal since
        seen: set[Any] = set()
        while True:
            try:
                new = await asyncio.to_thread(_timeline, dash, bank, project, since)
            except FactbankError as exc:
                yield ServerSentEventMessage(event="status", data=f"offline: {exc}")
                await asyncio.sleep(POLL_SECONDS * 3)
                continue
            fresh = [e for e in reversed(new) if (e.get("id"), e.get("kind")) not in seen
                     and (since is None or str(e.get("at")) > since)]
            for e in fresh:
                seen.add((e.get("id"), e.get("kind")))
                since = max(since or "", str(e.get("at")))
            if fresh:
                html = "".join(row.render(e=e, **template_globals()) for e in reversed(fresh))
                yield ServerSentEventMessage(event="rows", data=html.replace("\n", " "))
            else:
                yield ServerSentEventMessage(comment="idle")
            await asyncio.sleep(POLL_SECONDS)

    return ServerSentEvent(events())
