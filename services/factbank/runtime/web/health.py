"""Health routes, outside bank-token auth: liveness (`/healthz`) and readiness (`/readyz`)."""

from __future__ import annotations

from litestar import Response, get

from factbank.runtime.web.state import ServiceState


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
