"""The recall service: hybrid retrieval, injection blocks, and the bank's read views.

A handler names what it needs (`recall`, `reader`, `principal`, `service`:
`factbank.runtime.web.state.DEPENDENCIES`); every route reads, under one guard declared once on
the router (`READS`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date
from typing import Any, Literal

import asyncpg
import msgspec
from litestar import Litestar, Request, Router, get, post
from litestar.exceptions import ValidationException
from litestar.params import JSONBody, Parameter
from litestar.response import Stream

from factbank.models import (
    STATUSES,
    FactPage,
    Injection,
    InjectRequest,
    RuleCandidates,
    SearchQuery,
    SearchResult,
)
from factbank.read import inject
from factbank.read import misses as miss_report
from factbank.read.cache import BankCache
from factbank.read.search import Recall, load_background, search
from factbank.runtime.web.app import create_app
from factbank.runtime.web.auth import requires
from factbank.runtime.web.state import ServiceState
from factbank.settings import Settings
from factbank.staleness import rules
from factbank.store import facts
from factbank.store.banks import Principal
from factbank.text.claims import NEAR
from factbank.timeline import conflicts, events, handoffs
from factbank.write import categories, misses
from factbank_common.schema import SOURCE_KINDS
from factbank_recall.enrich import ENRICH

# The text /v1/inject and /v1/search work on: the head of a prompt (a hook sends all of it, up
# to 20,000 characters) or of a query (up to 4,000). The embedder reads 512 tokens at most
# (about 2,000 English or 500 Chinese characters), and tokenising the rest for BM25 costs tens
# of milliseconds on the event loop for nothing the gate would use, so the rest is ignored.
MAX_QUERY_CHARS = 2000


def min_version(request: Request) -> int | None:
    """`X-Factbank-Min-Version`: the bank version this caller has written (read-your-writes)."""
    raw = request.headers.get("x-factbank-min-version", "")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > 2**63 - 1:
        return None  # not a bank version (versions are bigints): no freshness demand
    return int(raw)


@post(
    "/v1/search",
    status_code=200,
    opt={"example": {"query": "which port does the API listen on?"}},
)
async def search_facts(
    request: Request, recall: Recall, principal: Principal, data: JSONBody[SearchQuery]
) -> SearchResult:
    """Hybrid search of this bank. Returns nothing rather than noise: unless the best match
    clears the recall gate (relevance 0.5), no result; after one that does, weaker related
    matches follow (relevance under 0.5). A superseded match comes back as its current
    successor, with `via` saying why."""
    result = await search(
        recall,
        principal.bank_id,
        data.query[:MAX_QUERY_CHARS],
        project=data.project,
        limit=data.limit,
        mode=data.mode,
        category=data.category,
        use_floor=data.floor,
        min_version=min_version(request),
    )
    if principal.session:  # a search in a harness session: its results were shown there
        await misses.record_exposures(
            recall.primary or recall.pool, principal.bank_id, principal.session,
            [h.fact.id for h in result.results], "search",
        )
    return result


@post(
    "/v1/inject",
    status_code=200,
    opt={"example": {"kind": "prompt", "session_id": "s1", "prompt": "deploy the API"}},
)
async def inject_block(
    request: Request, recall: Recall, principal: Principal, data: JSONBody[InjectRequest]
) -> Injection:
    """The text block an agent sees at session start or with a prompt ("" = inject nothing).
    Showing it delivers: its open handoffs are marked delivered, its conflicts told, its facts
    seen by the session. With `preview: true` the same block is computed and nothing is
    changed."""
    r, user = recall, principal
    if data.kind == "session":
        block = await inject.session_block(
            r,
            user.bank_id,
            user.bank_name,
            data.session_id,
            data.project,
            min_version(request),
            share=data.banks,
            member_id=user.member_id,
            preview=data.preview,
            withheld=set(data.withheld),
        )
    else:
        block = await inject.prompt_block(
            r,
            user.bank_id,
            user.bank_name,
            data.session_id,
            data.project,
            (data.prompt or "")[:MAX_QUERY_CHARS],
            min_version(request),
            share=data.banks,
            preview=data.preview,
            withheld=set(data.withheld),
        )
    degraded = (
        None
        if r.embedder is not None or data.kind == "session"
        else f"{r.embedder_error}; lexical results only"
    )
    subject = block.subject if data.correction and data.kind == "prompt" else None
    if not data.preview:
        await misses.record_exposures(
            r.primary or r.pool, user.bank_id, data.session_id, block.facts, "inject"
        )
        if data.correction and data.kind == "prompt":
            await misses.record_nudge(r.primary or r.pool, user.bank_id, data.session_id, subject)
    return Injection(
        text=block.text,
        facts=block.facts,
        tokens=block.tokens,
        bank=user.bank_name,
        degraded=degraded,
        sources=block.sources,
        subject=subject,
    )


def _words(name: str, text: str | None, known: tuple[str, ...]) -> list[str] | None:
    """A comma list of words from `known` (None: not given); anything else is a 400 naming
    the parameter."""
    if text is None or not text.strip():
        return None
    words = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in words if w not in known]
    if unknown:
        raise ValidationException(
            f"{name}: unknown value {unknown[0]!r}; expected a comma list of {', '.join(known)}"
        )
    return list(dict.fromkeys(words))


@get("/v1/facts")
async def list_facts(
    reader: asyncpg.Pool,
    principal: Principal,
    status: str | None = Parameter(default=None, description="active, superseded, ..."),
    category: str | None = Parameter(default=None),
    project: str | None = Parameter(default=None),
    after: int = Parameter(default=0, ge=0),
    limit: int = Parameter(default=100, ge=1, le=1000),
    statuses: str | None = Parameter(
        default=None, max_length=200, description="any of these statuses: active,stale"
    ),
    source_kind: str | None = Parameter(
        default=None, max_length=200, description="one source kind, or a comma list: file,commit"
    ),
    tag: str | None = Parameter(default=None, max_length=200, description="facts with this tag"),
    order: Literal["asc", "desc"] = Parameter(
        default="asc", description="desc: newest first, `after` being the last id seen"
    ),
) -> FactPage:
    """A page of this bank's facts in id order; pass `next_cursor` back as `after`. Deleted
    facts only when a status asks for them; `statuses` (a comma list) takes any of several,
    `source_kind` one or several kinds (verify pages a project's file and commit facts)."""
    wanted = _words("statuses", statuses, STATUSES)
    if wanted is not None and status is not None:
        raise ValidationException("statuses: give status or statuses, not both")
    kinds = _words("source_kind", source_kind, SOURCE_KINDS)
    async with reader.acquire() as conn:
        page, cursor = await facts.list_facts(
            conn,
            principal.bank_id,
            status=status,
            category=category,
            project=project,
            after=after,
            limit=limit,
            statuses=wanted,
            source_kinds=kinds,
            tag=tag,
            newest_first=order == "desc",
        )
    return FactPage(facts=page, next_cursor=cursor)


@get("/v1/rules/candidates")
async def rule_candidates(reader: asyncpg.Pool, principal: Principal) -> RuleCandidates:
    """Facts whose claim has held in at least two unrelated projects (confirmed from each, by
    a confirm that carried its project, and not disputed since; unrelated: different project
    keys whose remotes share nothing), each with its evidence. Proposals only: nothing edits a
    rule file (`factbank rules propose` writes a patch a person merges)."""
    async with reader.acquire() as conn:
        return RuleCandidates(candidates=await rules.candidates(conn, principal.bank_id))


@get("/v1/export")
async def export_facts(reader: asyncpg.Pool, principal: Principal) -> Stream:
    """Every fact of this bank (deleted ones excluded) as JSONL, streamed in id order."""
    bank_id = principal.bank_id

    async def lines() -> AsyncIterator[bytes]:
        after = 0
        while True:
            async with reader.acquire() as conn:
                page, cursor = await facts.list_facts(conn, bank_id, after=after, limit=500)
            for fact in page:
                yield msgspec.json.encode(fact) + b"\n"
            if cursor is None:
                return
            after = cursor

    return Stream(lines(), media_type="application/x-ndjson")


@get("/v1/categories")
async def list_categories(reader: asyncpg.Pool, principal: Principal) -> dict:
    """This bank's category registry, with how many facts each holds."""
    async with reader.acquire() as conn:
        return {"categories": await categories.list_all(conn, principal.bank_id)}


@get("/v1/stats")
async def stats(reader: asyncpg.Pool, recall: Recall, principal: Principal) -> dict:
    """Counts by status and category, index size, this bank's cache hit rates and the
    embedder in use."""
    async with reader.acquire() as conn:
        counts = await facts.bank_stats(conn, principal.bank_id)
    return {
        **counts,
        "embedder": recall.embedder.name if recall.embedder else None,
        "embedder_error": recall.embedder_error,
        "cache": cache_of(recall, principal.bank_id),
    }


def _date(name: str, text: str | None) -> date | None:
    """A YYYY-MM-DD query parameter (None: not given); anything else is a 400 naming it."""
    if text is None or not text.strip():
        return None
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValidationException(f"{name}: {text!r} is not a date (YYYY-MM-DD)") from None


@get("/v1/stats/misses")
async def stats_misses(
    reader: asyncpg.Pool,
    principal: Principal,
    weeks: int = Parameter(default=4, ge=1, le=104),
    since: str | None = Parameter(default=None, max_length=20, description="YYYY-MM-DD"),
    around: str | None = Parameter(
        default=None, max_length=20,
        description="YYYY-MM-DD: the `weeks` weeks before this date against the weeks after",
    ),
) -> dict:
    """Repeats (writes whose claim the bank already held) per week and project, by kind
    (same claim, correction, near-duplicate, retired claim) and by what the writing session
    had been shown (never: a recall miss; injected or searched: a presentation miss), with the
    facts involved; corrections the prompt hook recognised, facts saved after one, repeats of
    those; with `around`, the same totals before and after that date (docs/misses.md)."""
    async with reader.acquire() as conn:
        return await miss_report.report(
            conn, principal.bank_id, weeks=weeks, since=_date("since", since),
            around=_date("around", around),
        ) | {"bank": principal.bank_name}


@get("/v1/stats/growth")
async def stats_growth(
    reader: asyncpg.Pool, principal: Principal, days: int = Parameter(default=30, ge=1, le=366)
) -> dict:
    """Facts written per day over the last `days` days, oldest first (the dashboard's
    growth chart)."""
    async with reader.acquire() as conn:
        return {"days": await facts.growth(conn, principal.bank_id, days)}


@get("/v1/facts/{fact_id:int}/duplicates")
async def fact_duplicates(reader: asyncpg.Pool, principal: Principal, fact_id: int) -> dict:
    """The facts this one may duplicate (what the write gate would call its near-duplicates:
    same category and project, cosine >= the gate's NEAR), itself left out. Writes nothing."""
    async with reader.acquire() as conn:
        return {"duplicates": await facts.duplicates_of(conn, principal.bank_id, fact_id, NEAR)}


@get("/v1/whoami")
async def whoami(principal: Principal) -> dict:
    """The caller's bank, member and scopes: what a client may offer (the dashboard shows
    only the actions the token can do)."""
    return {"bank": principal.bank_name, "kind": principal.bank_kind,
            "member": principal.member_name, "scopes": sorted(principal.scopes)}


def cache_of(r: Recall, bank_id: int) -> dict[str, Any]:
    """This bank's cache figures only (see `BankCache`)."""
    cache = r.cache
    if isinstance(cache, BankCache):
        return cache.snapshot_for(bank_id)
    return {"backend": cache.backend}


def _since(text: str | None):
    try:
        return events.parse_since(text)
    except ValueError as exc:
        raise ValidationException(str(exc)) from None


@get("/v1/timeline")
async def get_timeline(
    reader: asyncpg.Pool,
    principal: Principal,
    project: str | None = Parameter(default=None, max_length=300),
    since: str | None = Parameter(default=None, max_length=64, description="2h, 30m, ISO"),
    limit: int = Parameter(default=200, ge=1, le=1000),
) -> dict:
    """This bank's timeline, newest first: sessions started and ended, files touched, commands
    run, handoffs and conflicts (one project, since a time). Never facts."""
    after = _since(since)
    async with reader.acquire() as conn:
        rows = await events.list_timeline(
            conn, principal.bank_id, project=project, since=after, limit=limit
        )
    return {"events": rows}


@get(
    "/v1/timeline/conflicts",
    opt={"example": {"project": "github.com/acme/api", "path": "src/zircon.py"}},
)
async def get_conflicts(
    service: ServiceState,
    principal: Principal,
    project: str = Parameter(max_length=300),
    path: str | None = Parameter(default=None, max_length=1000),
    session_id: str | None = Parameter(default=None, max_length=200),
    branch: str = Parameter(default="", max_length=200),
) -> dict:
    """Live conflicts in a project: with `path` (and `session_id`), the other sessions that
    touched that file within the conflict window; without, the conflicts recorded in the
    window (those involving `session_id` when given)."""
    window = service.settings.conflict_window_minutes
    async with service.reader.acquire() as conn:
        if path:
            found = await conflicts.conflicts_for(
                conn, principal.bank_id, project, path, session_id or "", branch,
                window_minutes=window,
            )
            return {"conflicts": [c.warning() for c in found]}
        rows = await conflicts.live_conflicts(
            conn, principal.bank_id, project, session_key=session_id, window_minutes=window
        )
    return {"conflicts": [r["detail"] for r in rows]}


@get("/v1/handoffs")
async def list_handoffs(
    reader: asyncpg.Pool,
    principal: Principal,
    project: str | None = Parameter(default=None, max_length=300),
    open_only: bool = Parameter(query="open", default=False),
) -> dict:
    """This bank's handoffs (one project; `open=true`: not yet delivered), newest first.
    Listing does not deliver them."""
    async with reader.acquire() as conn:
        rows = await handoffs.list_handoffs(conn, principal.bank_id, project, open_only=open_only)
    return {"handoffs": rows}


async def _start(rt: ServiceState) -> None:
    background = None
    if rt.model.embedder is not None:
        assert rt.pool is not None
        background = await load_background(rt.pool, rt.model.embedder)
    rt.recall = Recall(
        rt.reader,
        rt.model.embedder,
        rt.model.error,
        BankCache(rt.redis),
        primary=rt.pool,
        background=background,
        replica_wait_s=rt.settings.replica_wait_ms / 1000,
    )


# Every route of recall reads, under the one guard they share.
READS = Router(
    "/",
    guards=[requires("read")],
    route_handlers=[
        search_facts,
        inject_block,
        list_facts,
        rule_candidates,
        export_facts,
        list_categories,
        stats,
        stats_growth,
        stats_misses,
        fact_duplicates,
        whoami,
        get_timeline,
        get_conflicts,
        list_handoffs,
    ],
)
ROUTES = [READS, ENRICH]


def create(settings: Settings | None = None, *, dsn: str | None = None) -> Litestar:
    return create_app("factbank recall", ROUTES, settings, dsn=dsn, on_start=[_start])
