"""`GET /v1/enrich`: a batch of facts lacking writer questions or tags (read/enrich.py)."""

from __future__ import annotations

from typing import Literal

import asyncpg
import msgspec
from litestar import Router, get
from litestar.params import Parameter

from factbank.models import Fact
from factbank.read import enrich
from factbank.runtime.web.auth import requires
from factbank.store.banks import Principal


class EnrichBatch(msgspec.Struct, kw_only=True):
    facts: list[Fact]
    remaining: int  # facts lacking it in the bank, this batch included
    next_cursor: int | None = None


@get("/v1/enrich")
async def enrich_batch(
    reader: asyncpg.Pool,
    principal: Principal,
    lacking: Literal["questions", "tags", "either"] = Parameter(
        default="either", description="facts without questions, without tags, or either"),
    project: str | None = Parameter(default=None, max_length=500),
    after: int = Parameter(default=0, ge=0),
    limit: int = Parameter(default=20, ge=1, le=200),
) -> EnrichBatch:
    """Facts (active or disputed, oldest first) that lack writer questions or tags: write
    them with `PATCH /v1/facts/{id}` (tags and questions; redacted, re-embedded, audited).
    Facts arriving by import or backfill have none, and recall far worse without them."""
    async with reader.acquire() as conn:
        page, remaining = await enrich.batch(conn, principal.bank_id, lacking=lacking,
                                             project=project, after=after, limit=limit)
    return EnrichBatch(facts=page, remaining=remaining,
                       next_cursor=page[-1].id if len(page) == limit else None)


ENRICH = Router("/", guards=[requires("read")], route_handlers=[enrich_batch])
