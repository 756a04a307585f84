"""The review queue's routes: thin calls into `factbank.write.queue` (its docstring says what a
candidate is and what accepting does). Listing needs the `read` scope; queueing, accepting and
rejecting need `write`, as saving and superseding do."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from litestar import Router, get, post
from litestar.params import FromPath, JSONBody, Parameter

from factbank.models import NewFact
from factbank.runtime.web.auth import requires
from factbank.store.banks import Principal
from factbank.write import queue
from factbank.write.deps import Deps
from factbank.write.retain import Outcome
from factbank_ingest.caller import caller
from factbank_ingest.examples import EXAMPLE_FACT


class QueueFact(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A fact to queue instead of save, optionally the fact accepting it would supersede."""

    fact: NewFact
    replaces: int | None = None
    reason: Annotated[str, msgspec.Meta(max_length=500)] = ""


class Accept(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    edits: queue.Edits | None = None


class Reject(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: Annotated[str, msgspec.Meta(max_length=500)] = ""


class CandidatePage(msgspec.Struct, kw_only=True):
    candidates: list[queue.Candidate]
    next_cursor: int | None = None


class Accepted(msgspec.Struct, kw_only=True):
    candidate: queue.Candidate
    outcome: Outcome


@get("/v1/queue", guards=[requires("read")])
async def list_queue(
    deps: Deps,
    principal: Principal,
    status: Literal["pending", "accepted", "rejected", "withdrawn", "all"] = Parameter(
        default="pending"),
    fact: int | None = Parameter(default=None, ge=1, description="candidates replacing this fact"),
    after: int = Parameter(default=0, ge=0),
    limit: int = Parameter(default=50, ge=1, le=500),
) -> CandidatePage:
    """The review queue, oldest first: candidates (successors `verify` proposed, corrections
    agents queued), each with the fact it would supersede as it stands now."""
    async with deps.pool.acquire() as conn:
        page = await queue.list_candidates(
            conn, principal.bank_id, status=None if status == "all" else status, fact_id=fact,
            after=after, limit=limit)
    return CandidatePage(candidates=page,
                         next_cursor=page[-1].id if len(page) == limit else None)


@get("/v1/queue/{cand_id:int}", guards=[requires("read")])
async def get_candidate(deps: Deps, principal: Principal, cand_id: FromPath[int]
                        ) -> queue.Candidate:
    async with deps.pool.acquire() as conn:
        return await queue.get(conn, principal.bank_id, cand_id)


@post("/v1/queue", guards=[requires("write")], status_code=201,
      opt={"example": {"fact": EXAMPLE_FACT, "reason": "the user said the port changed"}})
async def queue_fact(deps: Deps, principal: Principal, data: JSONBody[QueueFact]
                     ) -> queue.Candidate:
    """Queue a fact for review instead of saving it (a correction you are not sure of): the
    write gate checks and redacts it as a save would; nothing enters the bank until someone
    accepts it. `replaces`: the fact accepting it supersedes."""
    # the write gate redacts the fact, its agent and the header, once (as on a save)
    return await queue.queue_fact(deps, principal, data.fact, data.replaces, data.reason)


@post("/v1/queue/{cand_id:int}/accept", guards=[requires("write")], status_code=200,
      opt={"example": {}})
async def accept_candidate(
    deps: Deps, principal: Principal, cand_id: FromPath[int], data: JSONBody[Accept]
) -> Accepted:
    """Store the candidate (with `edits` applied: content, category, tags, questions): a
    supersede of the fact it replaces with its reason ("source changed in <commit>"), or an
    add; one transaction with the decision. A candidate no longer pending is a 409."""
    user, _ = await caller(deps, principal)
    cand, outcome = await queue.accept(deps, user, cand_id, data.edits)
    return Accepted(candidate=cand, outcome=outcome)


@post("/v1/queue/{cand_id:int}/reject", guards=[requires("write")], status_code=200,
      opt={"example": {"reason": "the old line still holds"}})
async def reject_candidate(
    deps: Deps, principal: Principal, cand_id: FromPath[int], data: JSONBody[Reject]
) -> queue.Candidate:
    """Reject the candidate: kept as rejected, so the same text is not proposed again for
    the same fact."""
    user, _ = await caller(deps, principal)
    return await queue.reject(deps, user, cand_id, data.reason)


QUEUE = Router("/", route_handlers=[list_queue, get_candidate, queue_fact, accept_candidate,
                                    reject_candidate])
