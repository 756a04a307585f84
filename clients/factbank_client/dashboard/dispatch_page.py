"""The dashboard's dispatch page: pick a repository, an agent and a task; the agent runs
headless through `factbank_client.dispatch` (a detached supervisor writes the run's record and
log to disk), the page streams the log live over server-sent events, and a finished run
becomes a handoff in one click. Runs survive a dashboard restart because the library keeps
them on disk: the list re-reads them and shows a dead one as lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from litestar import Request, get, post
from litestar.exceptions import NotFoundException
from litestar.response import Redirect, ServerSentEvent, Template
from litestar.response.sse import ServerSentEventMessage

from factbank_client.dashboard.base import back, dash_of, form_fields, page, template_globals
from factbank_client.dispatch import AGENTS, LABELS, DispatchError, RunStore, make_handoff, start
from factbank_client.errors import FactbankError

# The live log polls the run's events file this often (a local file read: cheap).
POLL_SECONDS = 0.5


def store_of(request: Request) -> RunStore:
    dash = dash_of(request)
    if getattr(dash, "runs_store", None) is None:
        dash.runs_store = RunStore(dash.dispatch_dir) if dash.dispatch_dir else RunStore()
    return dash.runs_store


@get("/dispatch", sync_to_thread=True)
def dispatch_page(request: Request) -> Template:
    store = store_of(request)
    runs = store.list()
    chosen = request.query_params.get("run") or (runs[0].id if runs else None)
    run = store.get(chosen) if chosen else None
    events = store.events(run.id) if run else []
    return page(request, "dispatch.html", runs=runs, run=run, events=events,
                agents=[(a, LABELS[a]) for a in AGENTS],
                repo=request.query_params.get("repo") or dash_of(request).default_repo,
                last_seq=events[-1].seq if events else 0)


@post("/dispatch/start")
async def dispatch_start(request: Request) -> Redirect:
    store = store_of(request)
    form = await form_fields(request)
    agent, task, repo = form.get("agent", ""), form.get("task", "").strip(), form.get("repo", "")
    if agent not in AGENTS:
        return back("/dispatch", error=f"agent: one of {', '.join(AGENTS)}")
    if not task:
        return back("/dispatch", error="task: say what the agent should do")
    try:
        run = await asyncio.to_thread(start, store, agent, task, Path(repo),
                                      env=dash_of(request).dispatch_env,
                                      binaries=dash_of(request).dispatch_binaries)
    except DispatchError as exc:
        return back("/dispatch", error=str(exc))
    return back("/dispatch", run=run.id, done=f"started {LABELS[agent]} ({run.id})")


@get("/dispatch/{run_id:str}/stream")
async def dispatch_stream(request: Request, run_id: str) -> ServerSentEvent:
    """The run's new log lines as rendered rows (`event: append`), then `done` with the
    final status once the run has finished and every line was sent."""
    store = store_of(request)
    if store.get(run_id) is None:
        raise NotFoundException(f"no run {run_id!r}")
    after = int(request.query_params.get("after") or 0)
    row = request.app.template_engine.get_template("_dispatch_event.html")

    async def lines() -> AsyncIterator[ServerSentEventMessage]:
        nonlocal after
        while True:
            new = await asyncio.to_thread(store.events, run_id, after)
            if new:
                after = new[-1].seq
                html = "".join(row.render(ev=ev, **template_globals()) for ev in new)
                yield ServerSentEventMessage(event="append", data=html)
                continue
            run = await asyncio.to_thread(store.get, run_id)
            if run is None or run.finished:
                status = run.status if run else "gone"
                if run is not None and run.exit_code is not None:
                    status += f", exit {run.exit_code}"
                yield ServerSentEventMessage(event="done", data=status)
                return
            yield ServerSentEventMessage(comment="idle")
            await asyncio.sleep(POLL_SECONDS)

    return ServerSentEvent(lines())


@post("/dispatch/{run_id:str}/{action:str}")
async def dispatch_action(request: Request, run_id: str, action: str) -> Redirect:
    store = store_of(request)
    run = store.get(run_id)
    if run is None:
        raise NotFoundException(f"no run {run_id!r}")
    form = await form_fields(request)
    url = f"/dispatch?run={run_id}"
    try:
        if action == "handoff":
            to = form.get("to_agent") or None
            dash = dash_of(request)
            handoff_id = await asyncio.to_thread(make_handoff, run, dash.client, to_agent=to,
                                                 store=store)
            return back(url, done=f"handoff #{handoff_id} left for "
                        f"{LABELS.get(to or '', 'the next session')}")
        if action == "cancel":
            ok = await asyncio.to_thread(store.cancel, run_id)
            return back(url, done="cancelled" if ok else "it had already ended")
    except (DispatchError, FactbankError) as exc:
        return back(url, error=str(exc))
    raise NotFoundException(f"no action {action!r}")


ROUTES = [dispatch_page, dispatch_start, dispatch_stream, dispatch_action]
