"""Auth: a bank token on every route but health (`BearerAuth`), the scope a route requires
(`requires`), and the operator's own credential for /metrics (`metrics_guard`)."""

from __future__ import annotations

import dataclasses
import hmac
import os
from collections.abc import Awaitable, Callable

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult

from factbank.runtime.web.guard import header_text
from factbank.runtime.web.state import service_of
from factbank.settings import Settings
from factbank.store import banks
from factbank.store.banks import Principal

# /metrics is outside bank-token auth: it has its own credential (`metrics_guard`).
OPEN_PATHS = ["^/healthz$", "^/readyz$", "^/metrics$"]
# The operator's scrape credential. The counters are process-wide (every bank's requests,
# cache hits, redactions), so no bank token may read them: a read token of bank A would see
# the embedding-cache hits and searches caused by bank B. Unset: /metrics answers 401 to all.
METRICS_TOKEN_ENV = "FACTBANK_METRICS_TOKEN"



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
