"""The shapes that cross the API: request bodies are strict (unknown fields are an error)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

# The closed vocabularies the client also sends: one definition, in the wire contract module
# (dependency-free; see its docstring for why the server imports it from the client package).
from factbank_client.schema import Origin, SourceKind

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
    # Questions a later teammate would ask whose answer is this fact, in English and Chinese
    # (principle 15): each becomes an extra vector of the fact, and BM25 indexes them too.
    questions: list[str] = msgspec.field(default_factory=list)
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
    questions: list[str] = msgspec.field(default_factory=list)


class FactPage(msgspec.Struct, kw_only=True):
    facts: list[Fact]
    next_cursor: int | None


class Via(msgspec.Struct, kw_only=True):
    """Why a result is not the fact that matched: the match was superseded by this one."""

    superseded: int
    reason: str | None


class Hit(msgspec.Struct, kw_only=True):
    fact: Fact
    # The ranking: fused confidence (cosine units) + 0.02 x (effective trust - 0.5) + 0.01
    # for the current project (search.py says why).
    score: float
    relevance: float  # fused relevance, comparable across queries: the gate applies to it
    lexical: float | None = None  # BM25 score, when the lexical leg found it
    dense: float | None = None  # cosine similarity, when the dense leg found it
    via: Via | None = None
    bank: str = ""
    # What the dense leg matched best: "content", or "question: <text>" for one of the
    # fact's writer questions. None when only the lexical leg found it.
    match: str | None = None
    # Below the gate, returned only because a better hit of the same query passed it.
    companion: bool = False


class SearchResult(msgspec.Struct, kw_only=True):
    results: list[Hit]
    degraded: str | None = None  # set when a leg is unavailable (e.g. no embedder)
    below_floor: int = 0  # candidates refused by the gate or under the companion floor
    cached: bool = False


class SearchQuery(Strict):
    query: Annotated[str, msgspec.Meta(max_length=4000)]
    project: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 5
    mode: Literal["hybrid", "lexical", "dense"] = "hybrid"
    category: str | None = None
    floor: bool = True  # false: no gate, every match ranked (evals calibrate the gate)


class InjectRequest(Strict):
    kind: Literal["session", "prompt"]
    session_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    project: str | None = None
    prompt: Annotated[str, msgspec.Meta(max_length=20000)] | None = None
    # How many banks the caller merges into one block: each gets 1/banks of the budget.
    banks: Annotated[int, msgspec.Meta(ge=1, le=8)] = 1


class Injection(msgspec.Struct, kw_only=True):
    text: str  # empty when nothing qualifies: inject nothing
    facts: list[int]
    tokens: int
    bank: str
    degraded: str | None = None
