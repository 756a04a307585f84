"""The dashboard's litestar app: server-rendered pages over the client's configured banks.

It is a client like the CLI: every figure comes from the services over HTTP with the tokens in
the client config (`factbank_client.config`), through `factbank_client.client.Client`, so the
personal and team banks merge exactly as `factbank search` merges them. It never imports the
server packages. Handlers are synchronous (`sync_to_thread`): the client is httpx's blocking
one, and a slow service then holds a worker thread, never the event loop, so the live views
(server-sent events) keep streaming while a page waits.

Pages: facts (list, search, one fact with its history and actions), timeline (live),
health, banks and members (admin), evals; see docs/dashboard.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from litestar import Litestar, Request, Response
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from factbank_client.config import ClientConfig
from factbank_client.dashboard import security
from factbank_client.dashboard.admin_page import admin_action, admin_page, audit_export
from factbank_client.dashboard.base import HERE, Dash, template_globals
from factbank_client.dashboard.evals_page import (
    default_evals_dir,
    eval_plot,
    eval_run,
    eval_stream,
    evals_page,
)
from factbank_client.dashboard.facts_page import (
    fact_action,
    fact_duplicates,
    fact_page,
    facts_page,
    index,
)
from factbank_client.dashboard.health_page import health_page
from factbank_client.dashboard.timeline_page import timeline_page, timeline_stream

# --- facts -------------------------------------------------------------------------------


# --- health --------------------------------------------------------------------------------


# --- evals ---------------------------------------------------------------------------------


# --- the app -------------------------------------------------------------------------------


def _not_found(request: Request, exc: Exception) -> Response:
    detail = getattr(exc, "detail", "") or "not found"
    status = getattr(exc, "status_code", 500)
    engine = request.app.template_engine
    html = engine.get_template("error.html").render(
        status=status, detail=detail, csrf="", banks=[], nav="", **template_globals())
    return Response(html, status_code=status, media_type="text/html")


ROUTES = [index, facts_page, fact_page, fact_duplicates, fact_action, timeline_page,
          timeline_stream, health_page, admin_page, admin_action, audit_export, evals_page,
          eval_plot, eval_run, eval_stream]


def create(config: ClientConfig, keys: security.Secrets, port: int, *,
           evals_dir: Path | None = None, home: Path | None = None,
           dispatch_dir: Path | None = None, dispatch_env: dict[str, str] | None = None,
           dispatch_binaries: dict[str, str] | None = None,
           extra_routes: Sequence[Any] = ()) -> Any:
    """The dashboard as an ASGI app behind its gate (security.Gate)."""
    from factbank_client.dashboard import dispatch_page, misses_page, queue_page

    dash = Dash(config, keys, evals_dir=evals_dir if evals_dir is not None
                else default_evals_dir(), home=home, dispatch_dir=dispatch_dir,
                dispatch_env=dispatch_env, dispatch_binaries=dispatch_binaries)
    templates = TemplateConfig(directory=HERE / "templates", engine=JinjaTemplateEngine)
    app = Litestar(
        route_handlers=[*ROUTES, *dispatch_page.ROUTES, *misses_page.ROUTES, *queue_page.ROUTES,
                        *extra_routes,
                        create_static_files_router(path="/static", directories=[HERE / "static"])],
        template_config=templates,
        state=State({"dash": dash}),
        exception_handlers={HTTPException: _not_found},
        on_shutdown=[lambda: dash.http.close()],
        openapi_config=None,
        # Litestar's default logging config puts the root logger at INFO with a handler, so
        # every call the dashboard made printed an httpx "HTTP Request" line in its terminal.
        # Without it, only warnings and errors reach the terminal.
        logging_config=None,
    )
    env = templates.engine_instance.engine
    env.globals.update(template_globals())
    env.autoescape = True
    return security.Gate(app, keys, security.allowed_hosts(port))
