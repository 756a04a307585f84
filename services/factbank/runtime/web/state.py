"""A service's per-process state, and the dependencies a handler asks for by name.

Dependencies (litestar's `Provide`, registered once on the app): a handler names what it needs
as a parameter, `deps: Deps`, `principal: Principal`, `reader: asyncpg.Pool`, `service:
ServiceState` (and in recall, `recall: Recall`), instead of digging it out of the request.
The providers are synchronous and do no I/O: litestar resolves dependencies before it validates
the body, so anything that touches the database (the bank's redaction policy, the agent
header's cleaning) stays a call inside the handler, and a malformed body is still refused
before the database is asked anything. Dependencies never appear in the OpenAPI document.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from litestar import Litestar, Request
from litestar.connection import ASGIConnection
from litestar.di import Provide

from factbank.read.search import Recall
from factbank.settings import Settings
from factbank.store.banks import Principal
from factbank.text import embedder
from factbank.write.deps import Deps


@dataclass
class ServiceState:
    """Per-process state of a service: pools, cache, embedder. Built in the lifespan, kept in
    `app.state.service`, handed to handlers by the providers below."""

    settings: Settings
    pool: asyncpg.Pool | None = None
    read_pool: asyncpg.Pool | None = None
    redis: Any = None
    model: embedder.Loaded = field(default_factory=lambda: embedder.Loaded(None, "not loaded"))
    # Recall's retrieval state, built when recall starts (`factbank_recall.app._start`).
    recall: Recall | None = None
    # Redaction's rule engine compiling in a thread (`create_app`'s lifespan).
    redaction_warm_up: asyncio.Task | None = None
    # Ingest's embedder worker draining the vector queue (`factbank_ingest.app`).
    vector_worker: asyncio.Task | None = None
    # The audit chains' heads outside the database (`factbank.store.audit.Heads`, ingest).
    audit_heads: Any = None

    def deps(self) -> Deps:
        assert self.pool is not None
        return Deps(self.pool, self.settings, self.model.embedder)

    @property
    def reader(self) -> asyncpg.Pool:
        assert self.pool is not None
        return self.read_pool or self.pool


def service_of(app_or_connection: Litestar | ASGIConnection) -> ServiceState:
    app = app_or_connection if isinstance(app_or_connection, Litestar) else app_or_connection.app
    return app.state.service


def _provide_service(request: Request) -> ServiceState:
    return service_of(request)


def _provide_deps(request: Request) -> Deps:
    return service_of(request).deps()


def _provide_reader(request: Request) -> asyncpg.Pool:
    return service_of(request).reader


def _provide_principal(request: Request) -> Principal:
    return request.user  # set by BearerAuth on every route that is not open


def _provide_recall(request: Request) -> Recall:
    recall = service_of(request).recall
    assert recall is not None, "recall is built when the recall service starts"
    return recall


# What a handler may ask for by name. All cheap and synchronous (see the module docstring).
DEPENDENCIES = {
    "service": Provide(_provide_service, sync_to_thread=False),
    "deps": Provide(_provide_deps, sync_to_thread=False),
    "reader": Provide(_provide_reader, sync_to_thread=False),
    "principal": Provide(_provide_principal, sync_to_thread=False),
    "recall": Provide(_provide_recall, sync_to_thread=False),
}
