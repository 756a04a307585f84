"""The ingest service: the only way anything enters a bank."""

from __future__ import annotations

from factbank import facts
from factbank.models import Fact, NewFact
from factbank.settings import Settings
from factbank.web import create_app, requires, runtime
from factbank_ingest import writes
from litestar import Litestar, Request, get, post

EXAMPLE_FACT = {
    "content": "The staging API listens on port 8443",
    "category": "environment",
    "source": {"kind": "file", "location": "deploy/staging.yaml:14"},
    "quote": "listen: 8443",
    "origin": "verified",
    "tags": ["staging", "api", "port", "端口"],
}


@post("/v1/facts", guards=[requires("write")], status_code=201, opt={"example": EXAMPLE_FACT})
async def add_fact(request: Request, data: NewFact) -> writes.AddResult:
    """Add one fact (content, category, source, verbatim quote). Refusals say why."""
    rt = runtime(request)
    return await writes.add(rt, request.user, data)


@get("/v1/facts/{fact_id:int}", guards=[requires("read")])
async def get_fact(request: Request, fact_id: int) -> Fact:
    """One fact of this bank by id (404 for any other bank's id)."""
    async with runtime(request).pool.acquire() as conn:
        return await facts.get_fact(conn, request.user.bank_id, fact_id)


ROUTES = [add_fact, get_fact]


def create(settings: Settings | None = None, *, dsn: str | None = None) -> Litestar:
    return create_app("factbank ingest", ROUTES, settings, dsn=dsn)
