"""Error mapping: one error shape for both services, and what an error answer may echo.

A `FactbankError` carries its own status (`factbank.errors`); the few foreign exceptions that
mean something to the caller are in one table, `FOREIGN`, looked up along the exception's class
hierarchy. The database being unreachable (server stopped, restarting, refusing connections, a
pool that cannot hand out a connection in time) is a 503 "retry", never a 500: the write's
transaction never committed, so nothing is half-written. An error answer is redacted before it
leaves (`EchoRedaction`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from factbank.errors import FactbankError, Refused
from factbank.observability import REFUSALS

log = logging.getLogger("factbank.web")


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
