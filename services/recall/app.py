"""The recall service: hybrid retrieval, injection blocks, and the bank's read views."""

from __future__ import annotations

from litestar import Litestar, Request, get
from litestar.params import Parameter

from factbank import facts
from factbank.models import FactPage
from factbank.settings import Settings
from factbank.web import create_app, requires, runtime


@get("/v1/facts", guards=[requires("read")])
async def list_facts(
    request: Request,
    status: str | None = Parameter(default=None, description="active, superseded, ..."),
    category: str | None = Parameter(default=None),
    project: str | None = Parameter(default=None),
    after: int = Parameter(default=0, ge=0),
    limit: int = Parameter(default=100, ge=1, le=1000),
) -> FactPage:
    """A page of this bank's facts in id order; pass `next_cursor` back as `after`."""
    async with runtime(request).reader.acquire() as conn:
        page, cursor = await facts.list_facts(
            conn,
            request.user.bank_id,
            status=status,
            category=category,
            project=project,
            after=after,
            limit=limit,
        )
    return FactPage(facts=page, next_cursor=cursor)


ROUTES = [list_facts]


def create(settings: Settings | None = None, *, dsn: str | None = None) -> Litestar:
    return create_app("factbank recall", ROUTES, settings, dsn=dsn)
