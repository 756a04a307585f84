"""The shapes that cross the API: request bodies are strict (unknown fields are an error)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, get_args

import msgspec

# The closed vocabularies the client also sends: one definition, in the wire contract module
# (dependency-free; see its docstring for why the server imports it from the client package).
from factbank_common.schema import MAX_SYMBOL_CHARS, Origin, SourceKind

Status = Literal["active", "superseded", "disputed", "stale", "deleted"]
STATUSES: tuple[str, ...] = get_args(Status)


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base for request bodies: a misspelt field is a 400 naming it, never silently dropped."""


class Source(Strict):
    kind: SourceKind
    location: str = ""


# Hex digests as git and sha256 print them: bounded by their own shape, so nothing else fits.
Sha256Hex = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
BlobId = Annotated[str, msgspec.Meta(pattern=r"^([0-9a-f]{40}|[0-9a-f]{64}|sha256:[0-9a-f]{64})$")]
CommitId = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{7,64}$")]


class Fingerprint(Strict):
    """What a fact's source looked like when the client read it. The server never
    reads agents' files: it stores this (the path redacted like every string) and hands it back
    to `verify`, which compares the working tree against it."""

    quote_sha256: Sha256Hex  # the quoted region as it stood, trailing blanks stripped
    path: Annotated[str, msgspec.Meta(max_length=1000)] = ""  # repo-relative; "" for a commit
    line: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] | None = None  # first quoted line
    lines: Annotated[int, msgspec.Meta(ge=1, le=100_000)] | None = None  # lines it spans
    file_blob: BlobId | None = None  # `git hash-object`, or "sha256:<hex>" outside git
    commit: CommitId | None = None  # HEAD (dirty: the file differed from it), or the commit
    dirty: bool = False
    # A symbol-anchored file source ("path::Qualified.name", docs/staleness.md#symbol-anchors):
    # the symbol's name and the sha256 of its normalised text; `line`/`lines` are its span.
    # Left out of the JSON when absent (UNSET), so a line-anchored fingerprint reads as before.
    symbol: Annotated[str, msgspec.Meta(max_length=MAX_SYMBOL_CHARS)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    symbol_sha256: Sha256Hex | msgspec.UnsetType = msgspec.UNSET


class NewFact(Strict):
    content: str
    category: str
    source: Source
    quote: str
    origin: Origin = "inferred"
    tentative: bool = False
    tags: list[str] = msgspec.field(default_factory=list)
    # Questions a later teammate would ask whose answer is this fact, in English and Chinese
    # (docs/principles.md#the-writer-asks-the-questions): each becomes an extra vector of the fact,
    # and BM25 indexes them too.
    questions: list[str] = msgspec.field(default_factory=list)
    project: str | None = None
    agent: str | None = None
    # The client fills it for `file` and `commit` sources
    # (factbank_client/staleness/fingerprint.py).
    fingerprint: Fingerprint | None = None


class Stale(msgspec.Struct, kw_only=True):
    reason: str
    context: str
    since: datetime


class Review(msgspec.Struct, kw_only=True):
    reason: str
    cause: int  # the cited fact that changed
    since: datetime


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
    fingerprint: Fingerprint | None = None
    # Set while status is "stale": why, and the new text around the old line (verify).
    stale: Stale | None = None
    # Set while a fact it cites (directly or transitively) was superseded, turned stale or was
    # deleted and nobody has confirmed this one since: never injected until then.
    review: Review | None = None
    cites: list[int] = msgspec.field(default_factory=list)  # a derived fact's sources
    verified_at: datetime | None = None  # the last verify that found its source unchanged


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
    # The same block, changing nothing: no handoff delivered, no conflict marked told, no
    # fact counted as seen by the session (`factbank inject-preview`).
    preview: bool = False
    # Facts this client left out of its earlier blocks because its working tree no longer has
    # their quote (verify before inject, docs/staleness.md): not shown, so not "seen".
    withheld: Annotated[list[int], msgspec.Meta(max_length=200)] = msgspec.field(
        default_factory=list
    )
    # The prompt hook recognised a correction in `prompt` (factbank_client.hook.correction): the
    # answer names the prompt's top hit (`subject`) and the nudge is counted (docs/misses.md).
    correction: bool = False


class InjectSource(msgspec.Struct, kw_only=True):
    """A fact of the block that quotes a file of the caller's project: what the hook checks
    against the working tree before it shows the block (factbank_client/staleness/worktree.py)."""

    id: int
    source: Source
    quote: str
    fingerprint: Fingerprint | None = None


class Injection(msgspec.Struct, kw_only=True):
    text: str  # empty when nothing qualifies: inject nothing
    facts: list[int]
    tokens: int
    bank: str
    degraded: str | None = None
    sources: list[InjectSource] = msgspec.field(default_factory=list)
    # With `correction`: the fact the prompt is most likely correcting (its top hit, past the
    # recall gate, even when the session was already shown it); None when nothing cleared it.
    subject: int | None = None


# --- sources change, facts follow ---------------------------------------------------

ProjectKey = Annotated[str, msgspec.Meta(max_length=300)]
MAX_REMOTES = 20


class Confirm(Strict):
    """`POST /v1/facts/{id}/confirm`: the fact held when checked. With a fresh `quote` (and
    `location`, `fingerprint` when it moved) a stale fact becomes active again; a fact under
    review is reviewed. `project` and `remotes` (the caller's project key and its repository's
    normalised remotes) are recorded on the confirm event: the rule gate reads them."""

    reason: str = ""
    quote: str | None = None
    location: str | None = None
    fingerprint: Fingerprint | None = None
    project: ProjectKey | None = None
    remotes: Annotated[list[ProjectKey], msgspec.Meta(max_length=MAX_REMOTES)] = msgspec.field(
        default_factory=list
    )


class Successor(Strict):
    """What verify proposes for a stale fact whose quoted line changed (the review queue,
    write/queue.py): the new line as its quote, where it is, and the commit that changed it
    (None: the change is not committed)."""

    quote: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    location: Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
    fingerprint: Fingerprint | None = None
    commit: CommitId | None = None


class VerifyResult(Strict):
    """What the client found of one fact's source: still there (fresh), elsewhere (moved: the
    new `location` and `fingerprint`), or gone or changed (stale: why, and the new text around
    the old line)."""

    id: int
    verdict: Literal["fresh", "moved", "stale"]
    location: str | None = None
    fingerprint: Fingerprint | None = None
    reason: Annotated[str, msgspec.Meta(max_length=1000)] | None = None
    context: Annotated[str, msgspec.Meta(max_length=4000)] | None = None
    successor: Successor | None = None  # stale only: the changed line, queued for review


class VerifyBatch(Strict):
    results: Annotated[list[VerifyResult], msgspec.Meta(max_length=1000)]
    project: ProjectKey | None = None  # given: every fact named must be of this project


class Skipped(msgspec.Struct, kw_only=True):
    id: int
    reason: str


class VerifyAnswer(msgspec.Struct, kw_only=True):
    """Counts by what happened, the facts whose row changed, and what was left alone."""

    fresh: int = 0  # verified_at set
    moved: int = 0  # location and fingerprint updated (event relocated)
    stale: int = 0  # turned stale now (event staled)
    still_stale: int = 0  # were stale already (reason updated when it changed)
    flagged: int = 0  # derived facts flagged for review by the cascade
    changed: list[Fact] = msgspec.field(default_factory=list)
    flagged_ids: list[int] = msgspec.field(default_factory=list)
    skipped: list[Skipped] = msgspec.field(default_factory=list)
    proposed: list[int] = msgspec.field(default_factory=list)  # review queue candidates


class CheckBatch(Strict):
    facts: Annotated[list[NewFact], msgspec.Meta(max_length=200)]


class CheckVerdict(msgspec.Struct, kw_only=True):
    """What `POST /v1/facts` would do with one fact, decided without saving anything."""

    verdict: Literal["new", "same_claim", "retired", "refused"]
    # same_claim: the fact it would reinforce; retired: the superseded or deleted fact that
    # made the claim (an add answers "retired" with its successor and stores nothing)
    same_as: int | None = None
    possible_duplicate_of: list[int] = msgspec.field(default_factory=list)
    reasons: list[dict[str, str]] = msgspec.field(default_factory=list)
    redacted: list[dict[str, str]] = msgspec.field(default_factory=list)


class CheckAnswer(msgspec.Struct, kw_only=True):
    results: list[CheckVerdict]


class Evidence(msgspec.Struct, kw_only=True):
    """One project's part in a rule candidate: a confirm made there, not disputed since."""

    project: str
    fact_id: int
    event_id: int
    at: datetime
    member: str | None
    agent: str


class RuleCandidate(msgspec.Struct, kw_only=True):
    fact: Fact
    projects: list[str]
    evidence: list[Evidence]


class RuleCandidates(msgspec.Struct, kw_only=True):
    candidates: list[RuleCandidate]
