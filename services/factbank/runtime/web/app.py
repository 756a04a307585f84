"""The app factory both litestar apps are built with: auth on every route but health, the input
guard, one error shape, echo redaction, metrics, pools and the embedder in the lifespan, and
the dependencies a handler asks for by name.

The apps themselves only declare their routes; everything about *how* a request is checked
lives in this folder once (auth.py, guard.py, errors.py, health.py, state.py), so the two
services cannot disagree on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.exceptions import HTTPException
from litestar.middleware.base import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins.prometheus import PrometheusConfig, PrometheusController

from factbank.observability import AccessLog
from factbank.runtime.web.auth import OPEN_PATHS, BearerAuth, metrics_guard
from factbank.runtime.web.errors import EchoRedaction, domain_exception, http_exception
from factbank.runtime.web.guard import InputGuard
from factbank.runtime.web.health import healthz, readyz
from factbank.runtime.web.state import DEPENDENCIES, ServiceState, service_of
from factbank.settings import Settings
from factbank.store import db
from factbank.text import embedder

log = logging.getLogger("factbank.web")


Hook = Callable[[ServiceState], Any]


def _warm_up(model: embedder.Loaded) -> None:
    """Load jieba's dictionary and run the embedder once before serving, so the first prompt
    after a start is not the one that pays for it (a hook gives up after ~1 s)."""
    from factbank.text.tokenizer import warm_up

    warm_up()
    if model.embedder is not None:
        model.embedder.query("warm up")


def _warm_up_redaction() -> None:
    from factbank.redact import redaction

    try:
        redaction.warm_up()
    except Exception:  # a failed warm-up only costs the first write its compile
        log.exception("redaction warm-up failed")


def create_app(
    title: str,
    route_handlers: Sequence[Any],
    settings: Settings | None = None,
    *,
    on_start: Sequence[Hook] = (),
    on_stop: Sequence[Hook] = (),
    dsn: str | None = None,
    middleware: Sequence[Any] = (),
) -> Litestar:
    """Build a service app: auth on every route but health, one error shape, pools in lifespan."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = service_of(app)
        url = dsn or settings.database_url
        if not url:
            raise RuntimeError("DATABASE_URL is not set (use `factbank up` for the embedded one)")
        rt.pool = await db.create_pool(url, max_size=settings.pool_size)
        if settings.database_url_read:
            rt.read_pool = await db.create_pool(
                settings.database_url_read, max_size=settings.pool_size, check_schema=False
            )
        if settings.redis_url:
            import redis.asyncio as aioredis

            rt.redis = aioredis.from_url(
                settings.redis_url, socket_timeout=0.5, socket_connect_timeout=0.5
            )
        rt.model = await asyncio.to_thread(embedder.load, settings.embedder)
        await asyncio.to_thread(_warm_up, rt.model)
        # Redaction's rule engine compiles for ~6 s on a first use: in a thread, started now
        # and not awaited, so the service answers at once and the first write does not pay it
        # (a write that comes sooner waits on the same compile, off the event loop).
        if service in ("ingest", "recall"):  # ingest redacts writes; both redact error echoes
            rt.redaction_warm_up = asyncio.create_task(asyncio.to_thread(_warm_up_redaction))
        try:
            for hook in on_start:
                result = hook(rt)
                if hasattr(result, "__await__"):
                    await result
            yield
        finally:
            if rt.redaction_warm_up is not None:
                await rt.redaction_warm_up
                rt.redaction_warm_up = None
            for hook in on_stop:
                result = hook(rt)
                if hasattr(result, "__await__"):
                    await result
            if rt.redis is not None:
                await rt.redis.aclose()
            if rt.read_pool is not None:
                await rt.read_pool.close()
            await rt.pool.close()

    service = title.split()[-1]
    prometheus = PrometheusConfig(app_name=service, prefix="factbank", group_path=True)

    class Metrics(PrometheusController):
        """Prometheus metrics, for the operator's metrics token only (`metrics_guard`)."""

        path = "/metrics"
        guards = [metrics_guard]  # noqa: RUF012 (litestar reads it as a class attribute)

    app = Litestar(
        route_handlers=[healthz, readyz, Metrics, *route_handlers],
        lifespan=[lifespan],
        middleware=[
            DefineMiddleware(AccessLog, service=service),
            EchoRedaction,
            prometheus.middleware,
            DefineMiddleware(InputGuard, body=False),
            DefineMiddleware(BearerAuth, exclude=OPEN_PATHS),
            DefineMiddleware(InputGuard, body=True),
            *middleware,
        ],
        dependencies=DEPENDENCIES,
        exception_handlers={HTTPException: http_exception, Exception: domain_exception},
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title=title,
            version="1",
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
            ),
            security=[{"bearer": []}],
        ),
        # Logging is ours (observability.configure_logging, JSON lines); litestar's default
        # config would replace the root handler with its own text format at INFO.
        logging_config=None,
        debug=False,
    )
    app.state.service = ServiceState(settings=settings)
    return app
