"""What a client sends to the timeline: events (one batch at most `MAX_BATCH`) and handoffs,
strict shapes that refuse an unknown field; and the timeline's defaults."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from factbank.models import Strict

DEFAULT_WINDOW_MINUTES = 30
DEFAULT_RETENTION_DAYS = 30
MAX_BATCH = 500



EventKind = Literal["session_start", "session_end", "file", "command", "handoff"]
Short = Annotated[str, msgspec.Meta(max_length=200)]
PathText = Annotated[str, msgspec.Meta(max_length=1000)]
CommandText = Annotated[str, msgspec.Meta(max_length=4000)]


class NewEvent(Strict):
    """One thing that happened in a session. `session_id` is the harness's own session id;
    `path` and `cwd` are relative to the repository root; `at` defaults to now (a buffered
    event sent later carries the time it happened). `key` names the event within its session
    (e.g. the tool call's id and the event's index in it): an event whose key the session
    already holds is not stored again (migration 0006), so a hook and a history import, or
    two imports, never store the same event twice."""

    session_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    kind: EventKind
    project: Annotated[str, msgspec.Meta(max_length=300)] | None = None
    agent: Short | None = None
    machine: Short | None = None
    branch: Short | None = None
    cwd: PathText | None = None
    path: PathText | None = None
    tool: Short | None = None
    command: CommandText | None = None
    exit_code: Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)] | None = None
    at: datetime | None = None
    key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


class EventBatch(Strict):
    events: Annotated[list[NewEvent], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]


class NewHandoff(Strict):
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    project: Annotated[str, msgspec.Meta(max_length=300)] | None = None
    to_agent: Short | None = None
    to_member: Short | None = None
    files: Annotated[list[PathText], msgspec.Meta(max_length=50)] = msgspec.field(
        default_factory=list
    )
    fact_ids: Annotated[list[int], msgspec.Meta(max_length=50)] = msgspec.field(
        default_factory=list
    )
    session_id: Short | None = None
    agent: Short | None = None
