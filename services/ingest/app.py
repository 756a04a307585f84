"""The ingest service: the only way anything enters a bank. Routes only map HTTP to the core.

A handler names what it needs (`deps`, `principal`: `factbank.runtime.web.state.DEPENDENCIES`);
the write routes share one guard, declared once on their router (`WRITES`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import datetime
from typing import Annotated, Literal

import msgspec
from litestar import Litestar, Request, Response, Router, delete, get, patch, post
from litestar.params import FromPath, JSONBody, Parameter

from factbank.errors import BatchRefused, reason
from factbank.models import (
    CheckAnswer,
    CheckBatch,
    Confirm,
    Fact,
    NewFact,
    Strict,
    VerifyAnswer,
    VerifyBatch,
)
from factbank.redact import redaction
from factbank.runtime.web.app import create_app
from factbank.runtime.web.auth import requires
from factbank.runtime.web.state import service_of
from factbank.settings import Settings
from factbank.staleness import check, verify
from factbank.store import audit, banks, facts
from factbank.store.banks import Principal
from factbank.timeline import events, handoffs
from factbank.timeline.models import EventBatch, NewHandoff
from factbank.write import categories, lifecycle, retain
from factbank.write import vectors as vector_queue
from factbank.write.deps import Deps
from factbank.write.retain import Outcome
from factbank_ingest.admin import ADMIN
from factbank_ingest.caller import caller
from factbank_ingest.examples import EXAMPLE_FACT
from factbank_ingest.queue import QUEUE

log = logging.getLogger(__name__)

MAX_IMPORT_BYTES = 32 * 1024 * 1024
# Facts per import request: one transaction, gated and embedded as one batch. A bigger import
# is sent in chunks of at most this many lines (each chunk its own request and transaction).
MAX_IMPORT_LINES = 1000

class Supersede(Strict):
    fact: NewFact
    replaces: list[int]
    reason: str


class Judgement(Strict):
    reason: str = ""


class Edit(Strict):
    tags: list[str] | None = None
    category: str | None = None
    # Replaces the fact's writer questions (send the old ones too to add to them).
    questions: list[str] | None = None


class NewCategory(Strict):
    name: str
    description: str = ""
    auto_inject: bool = False
    decays: bool = True


class ImportResult(msgspec.Struct, kw_only=True):
    stored: int
    reinforced: int
    results: list[Outcome]
    # With existing=skip: facts already in the bank, neither stored again nor reinforced.
    present: int = 0
    visible_to: dict | None = None  # the bank and who can read it (`banks.audience`)


async def audience(deps: Deps, user: Principal) -> dict:
    async with deps.pool.acquire() as conn:
        return await banks.audience(conn, user)


class ImportRestore(Strict):
    """An exported fact's state, restored when the fact is new to the bank (`import`
    sends it for exported facts). `superseded_by` is an id in THIS bank, of a fact the same
    importer restored. Bounded by `retain.bound_restores`: a write token's trust is clamped to
    what an add gives, an admin's to 0.99; a future `confirmed_at` is refused."""

    id: int
    status: Literal["active", "disputed", "superseded", "stale", "deleted"]
    trust: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    superseded_by: int | None = None
    supersede_reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None
    confirmed_at: datetime | None = None


class ImportLine(NewFact):
    restore: ImportRestore | None = None


# Where a request's text is redacted: a fact's writes (add, import, supersede, check) in the
# write gate, every field and the X-Factbank-Agent header in one pass (`gate.check`); on the
# other routes the header here (`caller`) and the reasons where they are taken. The core
# redacts again where rows are written (`facts.record_event`, `audit.append`). Each step
# applies the bank's policy carried on the principal (reject: a 422 naming the field).


@post("/v1/facts", status_code=201, opt={"example": EXAMPLE_FACT})
async def add_fact(
    deps: Deps, principal: Principal, data: JSONBody[NewFact]
) -> Outcome | Response[Outcome]:
    """Save one verified fact: one atomic claim, its category, a source (kind + location) and
    a verbatim quote from it. A repeat of the same claim reinforces the existing fact; a similar
    but different claim is stored and `possible_duplicate_of` names what it may supersede. A
    claim the bank already superseded or deleted is not stored again: the answer (200, status
    "retired") gives the fact that holds now (`successor`) and why (`via.reason`); to store it
    again, supersede the successor with it."""
    user = principal  # the gate redacts the fact, its agent and the header, once
    outcome = await retain.add(deps, user, data)
    # A claim the bank already retired is answered, not stored: 200 with status "retired",
    # its successor and the reason.
    if outcome.status == "retired":
        return Response(outcome, status_code=200)
    return dataclasses.replace(outcome, visible_to=await audience(deps, user))


@post(
    "/v1/facts/import",
    status_code=201,
    request_max_body_size=MAX_IMPORT_BYTES,
    opt={"example": msgspec.json.encode(EXAMPLE_FACT).decode() + "\n"},
)
async def import_facts(
    request: Request,
    deps: Deps,
    principal: Principal,
    existing: Literal["reinforce", "skip"] = Parameter(default="reinforce"),
    vectors: Literal["now", "queue"] = Parameter(
        default="now",
        description="now: embed before the commit (the answer's facts are dense-searchable); "
        "queue: commit without waiting, the embedder worker fills the vectors after "
        "(`vectors_pending` in /v1/stats counts what is left)",
    ),
) -> ImportResult:
    """Import JSONL (one fact per line, at most 1000 lines) in ONE transaction: any bad line
    refuses the whole import, and the answer lists every bad line with its reasons.

    `existing=skip`: a fact already in the bank (same content, category and project) is left
    as it is ("present", not reinforced), so an export re-imported changes nothing. A line may
    carry `restore` (an exported fact's id, status, trust, supersede link): a fact new to the
    bank is stored in that state, within bounds (docs/api.md: a write token's trust is clamped
    to what an add gives, an admin token's to 0.99; no future `confirmed_at`; a link only
    between facts the same importer restored). With `existing=reinforce` a restored line
    already in the bank reinforces it (or answers "retired"), never a second copy.

    `vectors=queue` (what `factbank import` sends): the facts are committed set-based without
    waiting for the embedder and found by the lexical leg at once; the ingest service's
    embedder worker fills their vectors after. Lines without `restore` are then not checked
    for near-duplicates by meaning (an exact repeat is still "present")."""
    body = await request.body()
    items: list[NewFact] = []
    errors: list[dict] = []
    lines = [
        (n, ln)
        # Strict: InputGuard refused a body that is not UTF-8 (400 naming the line), as on
        # every route; a replacement character is never stored in its place.
        for n, ln in enumerate(body.decode("utf-8").splitlines(), 1)
        if ln.strip()
    ]
    if not lines:
        raise BatchRefused([{"line": 0, "reasons": [reason("body", "no JSONL lines")]}])
    if len(lines) > MAX_IMPORT_LINES:
        too_many = (f"{len(lines)} lines; the limit is {MAX_IMPORT_LINES} facts per import: "
                    "send the rest in further imports")
        raise BatchRefused([{"line": 0, "reasons": [reason("body", too_many)]}])
    for n, line in lines:
        try:
            items.append(msgspec.json.decode(line, type=ImportLine))
        except msgspec.ValidationError as exc:
            errors.append({"line": n, "reasons": [reason("line", str(exc))]})
        except msgspec.DecodeError as exc:
            errors.append({"line": n, "reasons": [reason("line", f"malformed JSON: {exc}")]})
    if errors:
        raise BatchRefused(errors)
    try:
        user = principal  # the gate redacts each line, its agent and the header, once
        restores = [_restore(it.restore) for it in items]
        if existing == "skip" or any(restores) or vectors == "queue":
            outcomes = await retain.import_many(
                deps, user, items, restores, skip_present=existing == "skip", vectors=vectors
            )
        else:
            outcomes = await retain.add_many(deps, user, items)
    except BatchRefused as exc:
        raise BatchRefused(
            [{"line": lines[e["index"]][0], "reasons": e["reasons"]} for e in exc.errors]
        ) from None
    return ImportResult(
        stored=sum(o.status == "stored" for o in outcomes),
        reinforced=sum(o.status == "reinforced" for o in outcomes),
        present=sum(o.status == "present" for o in outcomes),
        results=outcomes,
        visible_to=await audience(deps, user),
    )


def _restore(r: ImportRestore | None) -> retain.Restore | None:
    if r is None:
        return None
    return retain.Restore(r.id, r.status, r.trust, r.superseded_by, r.supersede_reason,
                          r.confirmed_at)


@post(
    "/v1/facts/supersede",
    status_code=201,
    opt={"example": {"fact": EXAMPLE_FACT, "replaces": [1], "reason": "moved to 8443"}},
)
async def supersede_facts(deps: Deps, principal: Principal, data: JSONBody[Supersede]) -> Outcome:
    """Replace facts that no longer hold: stores the new fact, retires the old ones and links
    them to it with the reason, so a recall that hits an old claim returns the current one."""
    user, item = principal, data.fact  # the gate redacts the fact, its agent and the header
    # The reason lands in facts.supersede_reason and is injected with the successor.
    why = await lifecycle.clean_reason(deps, user, data.reason)
    outcome = await retain.supersede(deps, user, item, data.replaces, why)
    return dataclasses.replace(outcome, visible_to=await audience(deps, user))


@post(
    "/v1/facts/{fact_id:int}/confirm",
    status_code=200,
    opt={
        "example": {
            "reason": "checked deploy/staging.yaml",
            "quote": "listen: 8443",
            "location": "deploy/staging.yaml:14",
            "project": "github.com/acme/api",
            "remotes": ["github.com/acme/api"],
        }
    },
)
async def confirm_fact(
    deps: Deps, principal: Principal, fact_id: FromPath[int], data: JSONBody[Confirm]
) -> Fact:
    """The fact held when you checked it: trust rises (t += 0.30(1-t)) and decay restarts.
    With a fresh `quote` (and `location`, `fingerprint` if it moved) a stale fact is active
    again; a fact under review is reviewed. `project` and `remotes` (your project key and your
    repository's normalised remotes) go on the confirm event: the rule gate counts them."""
    user, _ = await caller(deps, principal)
    return await lifecycle.confirm(deps, user, fact_id, data.reason, data)


EXAMPLE_VERIFY = {
    "project": "github.com/acme/api",
    "results": [
        {
            "id": 1,
            "verdict": "stale",
            "reason": "the quote is gone from deploy/staging.yaml:14",
            "context": "13: server:\n14:   listen: 9443\n15:   tls: true",
        }
    ],
}


@post("/v1/facts/verify", status_code=200, opt={"example": EXAMPLE_VERIFY})
async def verify_facts(
    deps: Deps, principal: Principal, data: JSONBody[VerifyBatch]
) -> VerifyAnswer:
    """What `factbank verify` found of each fact's source (at most 1000), applied in ONE
    transaction: fresh (verified_at set), moved (new location and fingerprint; event
    relocated), stale (status stale with the reason and the new text around the old line;
    event staled; facts citing it flagged for review). Answers counts and the changed facts."""
    user, policy = await caller(deps, principal)
    project = None
    if data.project and data.project.strip():
        project = await asyncio.to_thread(
            redaction.clean_text, "project", data.project.strip(), policy
        )
    return await verify.verify(deps, user, data.results, project, policy)


@post("/v1/facts/check", status_code=200, opt={"example": {"facts": [EXAMPLE_FACT]}})
async def check_facts(deps: Deps, principal: Principal, data: JSONBody[CheckBatch]) -> CheckAnswer:
    """What saving each fact (at most 200) would do, saving nothing: the write gate, redaction
    and the duplicate decision. Per fact: "new" (with `possible_duplicate_of`), "same_claim"
    (`same_as`: the fact a save would reinforce) or "refused" (`reasons`); `redacted` says what
    redaction would remove (field and kind)."""
    return CheckAnswer(results=await check.check_many(deps, principal, data.facts))


@post(
    "/v1/facts/{fact_id:int}/dispute",
    status_code=200,
    opt={"example": {"reason": "the file now says 8444"}},
)
async def dispute_fact(
    deps: Deps, principal: Principal, fact_id: FromPath[int], data: JSONBody[Judgement]
) -> Fact:
    """The fact looks wrong: trust falls (t -= 0.40t). If you know the right claim, supersede."""
    user, _ = await caller(deps, principal)
    return await lifecycle.dispute(deps, user, fact_id, data.reason)


@patch(
    "/v1/facts/{fact_id:int}",
    opt={
        "example": {
            "tags": ["staging", "端口"],
            "questions": ["Which port does staging use?", "预发环境的接口是哪个端口？"],
        }
    },
)
async def edit_fact(
    deps: Deps, principal: Principal, fact_id: FromPath[int], data: JSONBody[Edit]
) -> Fact:
    """Change a fact's tags, category or writer questions (the list given replaces the old
    one); content is immutable: supersede to change a claim."""
    user, _ = await caller(deps, principal)
    return await lifecycle.edit(
        deps,
        user,
        fact_id,
        tags=data.tags,
        category=data.category,
        questions=data.questions,
    )


@delete("/v1/facts/{fact_id:int}", status_code=200)
async def delete_fact(
    deps: Deps,
    principal: Principal,
    fact_id: FromPath[int],
    reason: str = Parameter(default="", max_length=500),
) -> Fact:
    """Soft delete: no longer recalled; the row and its history stay, and it is audited."""
    user, _ = await caller(deps, principal)
    return await lifecycle.delete(deps, user, fact_id, reason)


@delete("/v1/facts/{fact_id:int}/purge", guards=[requires("admin")], status_code=200)
async def purge_fact(deps: Deps, principal: Principal, fact_id: FromPath[int]) -> dict:
    """Hard delete for admins: the fact, its history, postings and cached embedding."""
    return await lifecycle.purge(deps, principal, fact_id)


@get("/v1/facts/{fact_id:int}", guards=[requires("read")])
async def get_fact(deps: Deps, principal: Principal, fact_id: FromPath[int]) -> dict:
    """A fact with its full history: events, the facts it superseded, and its successors."""
    return await lifecycle.history(deps.pool, principal, fact_id)


@post(
    "/v1/categories",
    status_code=201,
    opt={"example": {"name": "runbooks", "description": "How to operate a service."}},
)
async def add_category(
    deps: Deps, principal: Principal, data: JSONBody[NewCategory]
) -> dict:
    """Add a category to this bank's registry (names: lowercase, digits, '-', '_')."""
    user, _ = await caller(deps, principal)
    return await categories.add(
        deps.pool,
        user,
        data.name,
        data.description,
        data.auto_inject,
        data.decays,
    )


EXAMPLE_EVENT = {
    "events": [
        {
            "session_id": "claude-5f2c",
            "kind": "file",
            "project": "github.com/acme/api",
            "agent": "claude-code",
            "machine": "laptop",
            "branch": "main",
            "path": "src/app.py",
            "tool": "Edit",
        }
    ]
}


@post(
    "/v1/timeline/events",
    status_code=201,
    opt={"example": EXAMPLE_EVENT},
)
async def record_events(
    deps: Deps, principal: Principal, data: JSONBody[EventBatch]
) -> dict:
    """Record what happened in a session (at most 500 events): session start/end, a file
    touched (path relative to the repo root, tool), a command run (command, exit code). Every
    text is redacted; nothing becomes a fact. A file another session of the project touched
    within the conflict window comes back in `conflicts` (and is recorded as a conflict)."""
    user, policy = await caller(deps, principal)
    return await events.record(
        deps.pool,
        user,
        data.events,
        policy,
        window_minutes=deps.settings.conflict_window_minutes,
        retention_days=deps.settings.timeline_retention_days,
    )


@post(
    "/v1/handoffs",
    status_code=201,
    opt={
        "example": {
            "text": "Half-way through the retry refactor; tests in tests/test_retry.py fail",
            "project": "github.com/acme/api",
            "files": ["src/retry.py"],
        }
    },
)
async def add_handoff(
    deps: Deps, principal: Principal, data: JSONBody[NewHandoff]
) -> dict:
    """Leave a note for the next session in the project (any, or `to_agent`/`to_member`): it
    appears once, in that session's start block, and is marked delivered. Redacted."""
    user, policy = await caller(deps, principal)
    out = await handoffs.add_handoff(deps.pool, user, data, policy)
    return {**out, "visible_to": await audience(deps, user)}


# Every route that writes, under the one guard they share.
WRITES = Router(
    "/",
    guards=[requires("write")],
    route_handlers=[
        add_fact,
        import_facts,
        supersede_facts,
        confirm_fact,
        dispute_fact,
        verify_facts,
        check_facts,
        edit_fact,
        delete_fact,
        add_category,
        record_events,
        add_handoff,
    ],
)
ROUTES = [WRITES, purge_fact, get_fact, ADMIN, QUEUE]


class WriteVersion:
    """Every successful write answers with `X-Factbank-Version`, the bank's version after it,
    so the writer can ask recall (`X-Factbank-Min-Version`) for a view at least that fresh,
    even when recall reads from a lagging replica.

    And with `X-Factbank-Audit-Head` (`<id>:<hash>`), the bank's audit chain head after it,
    which this step also records outside the database (`audit.Heads.seal`): a
    writer holding it can later prove the log lost rows at its end."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return

        async def stamped(message) -> None:
            user = scope.get("user")
            if message["type"] == "http.response.start" and message["status"] < 400 and user:
                # The write has committed: a failure to read the version now must not turn
                # its answer into an error (the writer would retry a write that landed). The
                # header is left out instead; without it a reader gets the primary's view.
                rt = service_of(scope["app"])
                try:
                    async with rt.pool.acquire(timeout=2) as conn:
                        version = await facts.bank_version(conn, user.bank_id)
                        try:
                            head = (await rt.audit_heads.seal(conn, [user.bank_id])).get(
                                str(user.bank_id))
                        except (OSError, ValueError):  # not writable, or not JSON
                            log.exception("write committed; its audit head was not recorded")
                            head = None
                except Exception:  # the database went away, or the pool is exhausted
                    log.warning("write committed; its bank version could not be read")
                else:
                    message["headers"] = [
                        *message.get("headers", []),
                        (b"x-factbank-version", str(version).encode()),
                    ]
                    if head:
                        message["headers"].append(
                            (b"x-factbank-audit-head", audit.head_header(head).encode()))
            await send(message)

        await self.app(scope, receive, stamped)


async def _seal_audit(rt) -> None:
    """The audit key (generated in FACTBANK_HOME on a first start) before any write, then
    every audit chain's head recorded outside the database (the first start after migration
    0011 records where the keyed chain begins). Ingest only: recall writes no audit rows and
    may run where FACTBANK_HOME is read-only."""
    await asyncio.to_thread(audit.configure, rt.settings)
    rt.audit_heads = audit.Heads(rt.settings.audit_head_path)
    async with rt.pool.acquire() as conn:
        await rt.audit_heads.seal(conn)


def create(settings: Settings | None = None, *, dsn: str | None = None) -> Litestar:
    return create_app(
        "factbank ingest",
        ROUTES,
        settings,
        dsn=dsn,
        middleware=[WriteVersion],
        on_start=[_seal_audit, vector_queue.start],
        on_stop=[vector_queue.stop],
    )
