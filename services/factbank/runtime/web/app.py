"""What both litestar apps share: auth, scope guards, error mapping, health routes, lifespan,
and the dependencies a handler asks for by name.

The apps themselves only declare their routes; everything about *how* a request is checked
lives here once, so the two services cannot disagree on it.

Dependencies (litestar's `Provide`, registered once on the app): a handler names what it needs
as a parameter, `deps: Deps`, `principal: Principal`, `reader: asyncpg.Pool`, `service:
ServiceState` (and in recall, `recall: Recall`), instead of digging it out of the request.
The providers are synchronous and do no I/O: litestar resolves dependencies before it validates
the body, so anything that touches the database (the bank's redaction policy, the agent
header's cleaning) stays a call inside the handler, and a malformed body is still refused
before the database is asked anything. Dependencies never appear in the OpenAPI document.

Errors: a `FactbankError` carries its own status (`factbank.errors`); the few foreign
exceptions that mean something to the caller are in one table, `FOREIGN`, looked up along the
exception's class hierarchy. The database being unreachable (server stopped, restarting,
refusing connections, a pool that cannot hand out a connection in time) is a 503 "retry",
never a 500: the write's transaction never committed, so nothing is half-written.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import asyncpg
import msgspec
from litestar import Litestar, Request, Response, get
from litestar.connection import ASGIConnection
from litestar.di import Provide
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    PermissionDeniedException,
    ValidationException,
)
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.middleware.base import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins.prometheus import PrometheusConfig, PrometheusController
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from factbank.errors import BadInput, FactbankError, Refused
from factbank.observability import REFUSALS, AccessLog
from factbank.read.search import Recall
from factbank.settings import Settings
from factbank.store import banks, db
from factbank.store.banks import Principal
from factbank.text import embedder
from factbank.write.deps import Deps

log = logging.getLogger("factbank.web")

# /metrics is outside bank-token auth: it has its own credential (`metrics_guard`).
OPEN_PATHS = ["^/healthz$", "^/readyz$", "^/metrics$"]
# The operator's scrape credential. The counters are process-wide (every bank's requests,
# cache hits, redactions), so no bank token may read them: a read token of bank A would see
# the embedding-cache hits and searches caused by bank B. Unset: /metrics answers 401 to all.
METRICS_TOKEN_ENV = "FACTBANK_METRICS_TOKEN"
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")


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


class BearerAuth(AbstractAuthenticationMiddleware):
    """Every route but the health checks needs `Authorization: Bearer <token>`."""

    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:
        header = connection.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthorizedException(
                "missing bearer token: send 'Authorization: Bearer <token>'"
            )
        agent = header_text(connection.scope, b"x-factbank-agent")
        pool = service_of(connection).pool
        assert pool is not None
        async with pool.acquire() as conn:
            principal = await banks.authenticate(conn, token.strip(), agent)
        if principal is None:
            raise NotAuthorizedException("invalid or revoked token")
        session = header_text(connection.scope, b"x-factbank-session").strip()
        if session:
            principal = dataclasses.replace(principal, session=session[:200])
        return AuthenticationResult(user=principal, auth=token)


def check_value(value: Any, where: str = "body") -> None:
    """Every string free of NUL (Postgres text cannot hold one) and every integer within int64
    (every id, cursor and count is a bigint), walked without recursion. Raises BadInput."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                raise BadInput(f"{path}: the NUL character (\\u0000) is not allowed")
        elif isinstance(v, bool):
            continue
        elif isinstance(v, int):
            if not INT64_MIN <= v <= INT64_MAX:
                raise BadInput(f"{path}: integer {v} is out of range (64-bit signed)")
        elif isinstance(v, dict):
            for k, item in v.items():
                if isinstance(k, str) and "\x00" in k:
                    raise BadInput(f"{path}: the NUL character (\\u0000) is not allowed in a key")
                stack.append((f"{path}.{k}" if path else str(k), item))
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(v))


def header_text(scope: dict, name: bytes) -> str:
    """A header's value as the text its sender wrote: HTTP gives bytes, and the ASGI servers'
    str view decodes them as latin-1, which stored a UTF-8 `X-Factbank-Agent: 小明的 claude`
    as mojibake. Decoded as UTF-8 here; InputGuard has already refused a value
    that is not UTF-8 (400 naming the header)."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("utf-8", "replace")
    return ""


def check_utf8(data: bytes, where: str = "body") -> None:
    """One rule for every request body, JSON or JSONL: bytes that are not
    UTF-8 are a 400 naming the line (or the body) and the byte, never replaced with U+FFFD
    (an import did that silently while `/v1/facts` refused the same bytes)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start]
        line = len((head + b"x").splitlines())
        lines = data.rstrip(b"\r\n").splitlines()
        start = len(b"".join(head.splitlines(keepends=True)[: line - 1]))
        at = f"line {line}" if len(lines) > 1 else where
        raise BadInput(f"{at}: not valid UTF-8 (byte {exc.start - start + 1}"
                       f"{' of the line' if len(lines) > 1 else ''}: "
                       f"0x{data[exc.start]:02x})") from None


def check_json(body: bytes, where: str = "body") -> None:
    """`check_value` over a JSON body, or over each line of JSONL; what does not parse is left
    to the route, which names it. Nesting deeper than the decoder allows is a BadInput; bytes
    that are not UTF-8 are one too (`check_utf8`)."""
    check_utf8(body, where)
    try:
        check_value(msgspec.json.decode(body), where)
        return
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply") from None
    except msgspec.DecodeError:
        pass
    for n, line in enumerate(body.splitlines(), 1):
        try:
            value = msgspec.json.decode(line)
        except RecursionError:
            raise BadInput(f"line {n}: JSON nested too deeply") from None
        except msgspec.DecodeError:
            continue
        check_value(value, f"line {n}")


def _int_params(handler: Any) -> set[str]:
    """Names of a handler's int-typed parameters (query and path)."""
    names = getattr(handler, "_factbank_int_params", None)
    if names is None:
        names = set()
        for name, fd in handler.parsed_fn_signature.parameters.items():
            try:
                if fd.is_subclass_of(int) or fd.has_inner_subclass_of(int):
                    names.add(name)
            except TypeError:
                continue
        handler._factbank_int_params = names
    return names


class InputGuard:
    """ASGI middleware, once for both services: a request whose headers, path, query or body
    hold a value the database cannot take is a 400 naming it, before any handler runs, so
    nothing is written (principle: bad input is a 4xx, never a 500).

    With `body=False` it checks headers, path parameters and the query string (it runs before
    authentication, which reads a header); with `body=True` (after authentication) it buffers
    the body up to the route's own size limit, checks it, and replays it to the handler."""

    def __init__(self, app: Any, body: bool = False) -> None:
        self.app = app
        self.body = body

    @staticmethod
    async def _refuse(send: Any, message: str) -> None:
        payload = msgspec.json.encode({"status_code": 400, "detail": message})
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    def _check_request_line(self, scope: dict) -> None:
        for name, value in scope.get("headers", []):
            if b"\x00" in value:
                raise BadInput(f"header {name.decode('latin-1')}: the NUL character is not allowed")
            if name.lower() == b"x-factbank-agent":  # stored text: UTF-8 or refused
                check_utf8(value, "header X-Factbank-Agent")
            if name.lower() == b"x-factbank-session":
                check_utf8(value, "header X-Factbank-Session")
        if "\x00" in scope.get("path", ""):
            raise BadInput("path: the NUL character is not allowed")
        for name, value in (scope.get("path_params") or {}).items():
            check_value(value, name)
        query = scope.get("query_string", b"").decode("latin-1")
        handler = scope.get("route_handler")
        ints = _int_params(handler) if handler is not None else set()
        for name, value in parse_qsl(query, keep_blank_values=True):
            if "\x00" in name or "\x00" in value:
                raise BadInput(f"query {name!r}: the NUL character is not allowed")
            if name in ints and NUMBER.match(value):
                try:
                    number = float(value)
                except (ValueError, OverflowError):
                    number = float("inf")
                if not INT64_MIN <= number <= INT64_MAX:
                    raise BadInput(f"{name}: {value} is out of range (64-bit signed)")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            if not self.body:
                self._check_request_line(scope)
                await self.app(scope, receive, send)
                return
        except BadInput as exc:
            await self._refuse(send, str(exc))
            return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        handler = scope.get("route_handler")
        try:
            limit = handler.resolve_request_max_body_size() if handler is not None else None
        except Exception:
            limit = None
        limit = limit or 1 << 20
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self.app(scope, receive, send)  # litestar answers 413 without reading it
            return
        chunks: list[bytes] = []
        size, more, last = 0, True, None
        while more:
            message = await receive()
            if message["type"] != "http.request":
                last = message
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > limit:
                break
        body = b"".join(chunks)
        if size <= limit and last is None and body.strip():
            try:
                # Off the event loop: a 32 MiB import decodes for a while.
                await asyncio.to_thread(check_json, body)
            except BadInput as exc:
                await self._refuse(send, str(exc))
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                if last is not None:
                    return last
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        await self.app(scope, replay, send)


def redact_error_body(body: bytes) -> bytes:
    """An error answer with every secret it echoes redacted (JSON kept JSON)."""
    from factbank.redact import redaction

    try:
        value = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        text = body.decode("utf-8", "replace")
        return redaction.clean_text("error", text).encode()
    clean = redaction.clean_value(value, "error")
    return body if clean is value else msgspec.json.encode(clean)


class EchoRedaction:
    """ASGI middleware, once for both services: an error answer echoes what was sent ("unknown
    category '...'", an invalid enum value, a field's text), so its body is redacted like
    anything stored before it leaves: a refused request cannot hand a secret back into an
    agent's transcript or a proxy's log. In a thread: a refused 1,000-line import's answer
    takes a while to scan, and the event loop serves both services' other callers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: dict | None = None
        chunks: list[bytes] = []

        async def wrapped(message: dict) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = await asyncio.to_thread(redact_error_body, b"".join(chunks))
            headers = [
                (k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"
            ]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, wrapped)


def requires(scope: str) -> Callable[[ASGIConnection, BaseRouteHandler], Awaitable[None]]:
    """A guard: the token must carry `scope` (read, write or admin)."""

    async def guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:
        principal: Principal = connection.user
        if not principal.can(scope):
            raise PermissionDeniedException(f"this token lacks the '{scope}' scope")

    guard.__name__ = f"requires_{scope}"
    return guard


def metrics_token(settings: Settings) -> str:
    return str(getattr(settings, "metrics_token", "") or os.environ.get(METRICS_TOKEN_ENV, ""))


async def metrics_guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """/metrics answers only `Authorization: Bearer $FACTBANK_METRICS_TOKEN`, never a bank
    token (whatever its scopes: an admin of one bank is not the operator of the others)."""
    expected = metrics_token(service_of(connection).settings)
    scheme, _, given = connection.headers.get("authorization", "").partition(" ")
    if (
        not expected
        or scheme.lower() != "bearer"
        or not hmac.compare_digest(given.strip().encode(), expected.encode())
    ):
        raise NotAuthorizedException(
            "metrics need the operator's metrics token (FACTBANK_METRICS_TOKEN), not a bank "
            "token" + ("" if expected else "; none is set on this server")
        )


def _error(status: int, message: str, **extra: Any) -> Response:
    body: dict[str, Any] = {"status_code": status, "detail": message}
    body.update({k: v for k, v in extra.items() if v is not None})
    return Response(body, status_code=status)  # redacted on its way out: EchoRedaction


def http_exception(_: Request, exc: HTTPException) -> Response:
    extra = exc.extra if isinstance(exc, ValidationException) else None
    detail = exc.detail
    if isinstance(exc, ValidationException) and extra:
        # Name the field in the message itself, not only in the structured extra.
        parts = []
        for item in extra if isinstance(extra, list) else [extra]:
            if isinstance(item, dict):
                parts.append(f"{item.get('key') or item.get('source', '')}: {item.get('message')}")
        if parts:
            detail = f"{exc.detail}: " + "; ".join(parts)
    return _error(exc.status_code, detail, extra=extra)


UNAVAILABLE = "the database is unavailable; retry"

# Foreign exceptions that mean something to the caller: status and detail, found by the nearest
# class along the exception's MRO (so asyncpg's many 08xxx classes need one row). A domain error
# is not here: it carries its own status (`FactbankError.status`).
FOREIGN: dict[type[BaseException], tuple[int, str]] = {
    # A value the database cannot take that no check caught: still the caller's.
    asyncpg.DataError: (400, "invalid input value ({name})"),
    OverflowError: (400, "invalid input value ({name})"),
    RecursionError: (400, "input nested too deeply"),
    ValueError: (422, "{exc}"),
    # The database is unreachable. Seen with a server stopped under running services: a
    # statement on a connection the server closed (ConnectionDoesNotExistError, 08003), a
    # server shutting down or starting (AdminShutdownError 57P01, CannotConnectNowError
    # 57P03), a reconnect refused (ConnectionRefusedError over TCP, FileNotFoundError for a
    # Unix socket that is gone: both OSError), a pool acquire or a statement that timed out
    # (TimeoutError, an OSError too); and the server's connection limit (53300).
    asyncpg.PostgresConnectionError: (503, UNAVAILABLE),
    asyncpg.CannotConnectNowError: (503, UNAVAILABLE),
    asyncpg.AdminShutdownError: (503, UNAVAILABLE),
    asyncpg.CrashShutdownError: (503, UNAVAILABLE),
    asyncpg.TooManyConnectionsError: (503, UNAVAILABLE),
    OSError: (503, UNAVAILABLE),
}


# What asyncpg says, as an InterfaceError with no cause, when a connection the request holds
# was lost: "connection is closed" (its own check), and, for a pooled connection lost while
# the request did no I/O on it (seen in the compose drill: Postgres killed while an import
# was embedding, seconds on a worker thread), "cannot call Connection.execute(): connection
# has been released back to the pool" (the pool let go of the dead connection under the
# request). Other InterfaceErrors ("another operation is in progress") are bugs: 500.
CONNECTION_LOST = ("connection is closed", "connection has been released back to the pool")


def _answer(exc: BaseException) -> tuple[int, str]:
    """The status and detail an exception is answered with (500: a bug, logged)."""
    if isinstance(exc, FactbankError):
        return exc.status, f"refused: {exc}" if isinstance(exc, Refused) else str(exc)
    for cls in type(exc).__mro__:
        if cls in FOREIGN:
            status, text = FOREIGN[cls]
            return status, text.format(exc=exc, name=type(exc).__name__)
    # asyncpg reports a connection lost mid-transaction as an InterfaceError ("cannot call
    # Transaction.__aexit__(): the underlying connection is closed") raised while handling
    # the ConnectionDoesNotExistError: the outage is in the exception's context.
    context = exc.__cause__ or exc.__context__
    if context is not None and _answer(context)[0] == 503:
        return 503, UNAVAILABLE
    if isinstance(exc, asyncpg.InterfaceError) and str(exc).endswith(CONNECTION_LOST):
        return 503, UNAVAILABLE
    return HTTP_500_INTERNAL_SERVER_ERROR, "internal error (logged)"


def domain_exception(_: Request, exc: Exception) -> Response:
    status, detail = _answer(exc)
    if isinstance(exc, FactbankError):
        if isinstance(exc, Refused):
            for item in exc.reasons:
                REFUSALS.labels(field=item["field"].split("[")[0]).inc()
        # The lists a refusal answers with: Refused.reasons, BatchRefused.errors.
        extra = {"reasons": getattr(exc, "reasons", None), "errors": getattr(exc, "errors", None)}
        return _error(status, detail, **extra)
    if status == 503:
        log.warning("database unavailable: %s", type(exc).__name__)
    elif status == 400 and not isinstance(exc, RecursionError):
        log.warning("bad input reached the database: %s", type(exc).__name__)
    elif status == HTTP_500_INTERNAL_SERVER_ERROR:
        log.exception("unhandled error")
    return _error(status, detail)


@get("/healthz", exclude_from_auth=True, include_in_schema=False, sync_to_thread=False)
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@get("/readyz", exclude_from_auth=True, include_in_schema=False)
async def readyz(service: ServiceState) -> Response:
    """Readiness: the database answers and, when configured, Redis does."""
    rt = service
    checks: dict[str, str] = {}
    ok = True
    try:
        assert rt.pool is not None
        async with rt.pool.acquire(timeout=2) as conn:
            await conn.fetchval("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # readiness reports, it does not raise
        ok = False
        checks["database"] = f"error: {type(exc).__name__}"
    if rt.settings.redis_url:
        try:
            await rt.redis.ping()
            checks["redis"] = "ok"
        except Exception as exc:
            ok = False
            checks["redis"] = f"error: {type(exc).__name__}"
    body = {"status": "ok" if ok else "unavailable", **checks}
    return Response(body, status_code=200 if ok else 503)


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
