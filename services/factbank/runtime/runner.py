"""Run the services under uvicorn: one of them (`factbank serve`) or both (`factbank up`).

Both servers share one event loop and one signal handler, so a single Ctrl-C stops both and
returns to the caller, which then stops whatever else it started (the embedded Postgres).

`serve_in_thread` runs both in a background thread instead, for the tests and the evals, which
talk to the real services over real HTTP from the same process.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import uvicorn

from factbank.runtime.lifecycle import STOP_SIGNALS
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
    elif which == "worker":
        from factbank_worker.app import create
    else:
        raise ValueError(f"unknown service {which!r}: ingest, recall or worker")
    return create(settings, dsn=dsn)


def _server(app: Any, host: str, port: int) -> _Server:
    return _Server(
        uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
        )
    )


async def run_services(
    settings: Settings,
    dsn: str,
    which: tuple[str, ...] = ("ingest", "recall"),
    ports: dict[str, int] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve until Ctrl-C. `on_ready` is called once, after every service answers /readyz
    with 200 (`factbank up` prints its banner then, not before)."""
    from factbank.observability import configure_logging

    configure_logging(settings)
    ports = ports or {"ingest": settings.ingest_port, "recall": settings.recall_port}
    servers = [_server(_app(name, settings, dsn), settings.host, ports[name]) for name in which]
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for s in servers:
            s.should_exit = True

    # Every way a terminal ends (Ctrl-C, a closed window's SIGHUP, kill's SIGTERM, Ctrl-\\)
    # stops the services the same way; a signal ignored at start (`nohup`) stays ignored.
    handled = [sig for sig in STOP_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN]
    for sig in handled:
        loop.add_signal_handler(sig, stop)
    watcher = (asyncio.create_task(_when_ready(servers, on_ready))
               if on_ready is not None else None)
    try:
        await asyncio.gather(*(s.serve() for s in servers))
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        for sig in handled:
            loop.remove_signal_handler(sig)  # back to the default: the caller sets its own
    if any(not s.started for s in servers):
        raise RuntimeError("a service failed to start; see the log above")


async def _when_ready(servers: list[_Server], on_ready: Callable[[], None]) -> None:
    """Poll each server's /readyz (over loopback when bound to every address) until all answer
    200, then call `on_ready`; gives up quietly when a server stops first."""
    import httpx

    def url(s: _Server) -> str:
        host = s.config.host
        host = "127.0.0.1" if host in ("0.0.0.0", "", None) else host
        host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
        return f"http://{host}:{s.config.port}/readyz"

    async with httpx.AsyncClient(timeout=2.0) as http:
        pending = list(servers)
        while pending:
            if any(s.should_exit for s in servers):
                return
            still = []
            for s in pending:
                try:
                    ready = s.started and (await http.get(url(s))).status_code == 200
                except httpx.HTTPError:
                    ready = False
                if not ready:
                    still.append(s)
            pending = still
            if pending:
                await asyncio.sleep(0.2)
    on_ready()


def free_port() -> int:
    """A loopback port nothing listens on at the moment (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_in_thread(
    settings: Settings, dsn: str
) -> contextlib.AbstractContextManager[dict[str, str]]:
    """Both services on free loopback ports until the block ends; yields their base URLs by
    name ("ingest", "recall"). For tests and evals that need the real services in-process."""
    return serve_apps_in_thread({name: _app(name, settings, dsn) for name in ("ingest", "recall")})


@contextlib.contextmanager
def serve_apps_in_thread(apps: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """Serve ASGI apps under uvicorn on free loopback ports, in a daemon thread with its own
    event loop (the caller's thread stays free to make blocking HTTP calls, and an async test
    keeps its own loop). Returns once every server has started, raising if one could not;
    on exit the servers shut down (lifespan included) and the thread is joined."""
    servers = {name: _server(app, "127.0.0.1", free_port()) for name, app in apps.items()}
    errors: list[BaseException] = []

    async def serve(server: _Server) -> None:
        try:
            await server.serve()
        except (Exception, SystemExit) as exc:  # uvicorn exits when it cannot start
            errors.append(exc)
            for s in servers.values():
                s.should_exit = True

    async def serve_all() -> None:
        await asyncio.gather(*(serve(s) for s in servers.values()))

    thread = threading.Thread(target=lambda: asyncio.run(serve_all()), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not all(s.started for s in servers.values()):
            if errors or not thread.is_alive() or time.monotonic() > deadline:
                down = ", ".join(name for name, s in servers.items() if not s.started)
                cause = errors[0] if errors else None
                raise RuntimeError(f"{down} did not start; see the log") from cause
            time.sleep(0.05)
        yield {name: f"http://127.0.0.1:{s.config.port}" for name, s in servers.items()}
    finally:
        for s in servers.values():
            s.should_exit = True
        thread.join(timeout=30)
