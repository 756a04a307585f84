"""Run the services under uvicorn: one of them (`factbank serve`) or both (`factbank up`).

Both servers share one event loop and one signal handler, so a single Ctrl-C stops both and
returns to the caller, which then stops whatever else it started (the embedded Postgres).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

import uvicorn

from factbank.settings import Settings


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # signals are handled by run_services
        yield


def _app(which: str, settings: Settings, dsn: str):
    if which == "ingest":
        from factbank_ingest.app import create
    elif which == "recall":
        from factbank_recall.app import create
    else:
        raise ValueError(f"unknown service {which!r}: ingest or recall")
    return create(settings, dsn=dsn)


async def run_services(
    settings: Settings,
    dsn: str,
    which: tuple[str, ...] = ("ingest", "recall"),
    ports: dict[str, int] | None = None,
) -> None:
    from factbank.observability import configure_logging

    configure_logging(settings.log_level)
    ports = ports or {"ingest": settings.ingest_port, "recall": settings.recall_port}
    servers = [
        _Server(
            uvicorn.Config(
                _app(name, settings, dsn),
                host=settings.host,
                port=ports[name],
                log_level="warning",
                access_log=False,
                lifespan="on",
            )
        )
        for name in which
    ]
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for s in servers:
            s.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    try:
        await asyncio.gather(*(s.serve() for s in servers))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if any(not s.started for s in servers):
        raise RuntimeError("a service failed to start; see the log above")
