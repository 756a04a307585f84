"""The shapes that cross the API: request bodies are strict (unknown fields are an error)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

SourceKind = Literal["file", "url", "commit", "command", "user", "doc"]
Origin = Literal["user", "verified", "inferred"]
Status = Literal["active", "superseded", "disputed", "stale", "deleted"]


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base for request bodies: a misspelt field is a 400 naming it, never silently dropped."""


class Source(Strict):
    kind: SourceKind
    location: str = ""


class NewFact(Strict):
    content: str
    category: str
    source: Source
    quote: str
    origin: Origin = "inferred"
    tentative: bool = False
    tags: list[str] = msgspec.field(default_factory=list)
    project: str | None = None
    agent: str | None = None


class Author(msgspec.Struct, kw_only=True):
    member: str
    agent: str


class Fact(msgspec.Struct, kw_only=True):
    id: int
    bank: str
    content: str
    category: str
    tags: list[str]
    source: Source
    quote: str
    project: str | None
    origin: Origin
    tentative: bool
    trust: float
    effective_trust: float
    status: Status
    superseded_by: int | None
    supersede_reason: str | None
    created_by: Author
    created_at: datetime
    updated_at: datetime
    confirmed_at: datetime


class FactPage(msgspec.Struct, kw_only=True):
    facts: list[Fact]
    next_cursor: int | None
