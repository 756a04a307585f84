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

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from litestar import Litestar, Request, Response, get, post
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.datastructures import State
from litestar.exceptions import HTTPException, NotFoundException
from litestar.response import Redirect, ServerSentEvent, Stream, Template
from litestar.response.sse import ServerSentEventMessage
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from factbank_client import render, safefs
from factbank_client.client import INGEST, RECALL, Client, FactbankError, new_fact
from factbank_client.config import ClientConfig
from factbank_client.dashboard import security
from factbank_common.schema import SOURCE_KINDS

HERE = Path(__file__).parent
PAGE_SIZE = 25
# The live timeline asks the services for new events this often (each bank, one query on an
# indexed (bank, at) range): the page shows a new event within ~2 s.
POLL_SECONDS = 2.0
CATEGORIES_TTL = 60.0
SCOPES_TTL = 60.0
STATUSES = ("active", "stale", "superseded", "deleted")


class Dash:
    """What every handler shares: the client over the configured banks, and small caches of
    what changes rarely (each bank's scopes and categories), so a page costs its own calls."""

    def __init__(self, config: ClientConfig, keys: security.Secrets, *,
                 evals_dir: Path | None = None, home: Path | None = None,
                 dispatch_dir: Path | None = None,
                 dispatch_env: dict[str, str] | None = None,
                 dispatch_binaries: dict[str, str] | None = None) -> None:
        self.config = config
        self.dispatch_binaries = dispatch_binaries
        # Dispatch (dispatch_page.py): where runs are kept (None: the library's default), the
        # harnesses' environment (None: this process's), the repository the form suggests.
        self.dispatch_dir = dispatch_dir
        self.dispatch_env = dispatch_env
        self.default_repo = os.getcwd()
        self.runs_store: Any = None
        self.keys = keys
        self.http = httpx.Client(timeout=httpx.Timeout(30.0, connect=3.0))
        self.client = Client(config, agent="dashboard", http=self.http)
        self.evals_dir = evals_dir
        self.home = home
        self._cache: dict[tuple, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self.runs: dict[str, EvalRun] = {}
        self._stamp = _stamp(config.path)

    def refresh(self) -> None:
        """Read the config file again when it changed since the last request: a bank logged in
        after the dashboard started answered 404 (issue 21). One stat per request; a config
        that no longer parses keeps the last good one."""
        stamp = _stamp(self.config.path)
        if stamp == self._stamp or self.config.path is None:
            return
        from factbank_client import config as client_config

        try:
            config = client_config.load(self.config.path)
        except (OSError, ValueError):
            return
        with self._lock:
            self.config, self._stamp = config, stamp
            self.client = Client(config, agent="dashboard", http=self.http)
            self._cache.clear()  # scopes and categories were the old tokens'

    @property
    def banks(self) -> list[str]:
        return self.config.banks

    def cached(self, key: tuple, ttl: float, fn: Callable[[], Any]) -> Any:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit and now - hit[0] < ttl:
                return hit[1]
        value = fn()
        with self._lock:
            self._cache[key] = (now, value)
        return value

    def scopes(self, bank: str) -> list[str]:
        """The bank token's scopes (GET /v1/whoami); [] when the bank cannot be reached."""
        def ask() -> list[str]:
            try:
                return list(self.client._json("GET", RECALL, "/v1/whoami", bank)["scopes"])
            except FactbankError:
                return []
        return self.cached(("scopes", bank), SCOPES_TTL, ask)

    def categories(self, bank: str) -> list[dict]:
        def ask() -> list[dict]:
            try:
                return self.client.categories(banks=[bank])[bank]
            except FactbankError:
                return []
        return self.cached(("categories", bank), CATEGORIES_TTL, ask)


def _stamp(path: Path | None) -> tuple[int, int] | None:
    try:
        st = path.stat() if path is not None else None
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size) if st else None


def dash_of(request: Request) -> Dash:
    dash = request.app.state.dash
    dash.refresh()
    return dash


def _bank(dash: Dash, bank: str | None) -> str:
    if not dash.banks:
        raise HTTPException(status_code=503, detail="no bank configured: run factbank login")
    if bank in (None, ""):
        return dash.banks[0]
    if bank not in dash.banks:
        raise NotFoundException(f"no bank {bank!r} is configured here")
    return bank


def page(request: Request, name: str, **context: Any) -> Template:
    dash = dash_of(request)
    return Template(template_name=name, context={
        "csrf": dash.keys.csrf, "banks": dash.banks, "nav": name.split(".")[0],
        "dispatch_enabled": True,
        "flash": request.query_params.get("done"), "error": request.query_params.get("error"),
        **context})


def back(url: str, **params: str) -> Redirect:
    """A 303 to `url` on this dashboard (never elsewhere: security.local_url), with `params`
    (a flash message, an error) in its query."""
    query = urlencode({k: v for k, v in params.items() if v})
    return Redirect(security.local_url(url + (("&" if "?" in url else "?") + query
                                              if query else "")), status_code=303)


# --- helpers the templates use ----------------------------------------------------------


def sparkline(values: Sequence[float], width: int = 320, height: int = 56) -> dict:
    """An inline SVG trust line: points in a 0..1 band (trust is a probability-like score),
    so two facts' lines compare by height at a glance."""
    vals = [max(0.0, min(1.0, float(v))) for v in values] or [0.0]
    if len(vals) == 1:
        vals = vals * 2
    step = width / (len(vals) - 1)
    pad = 4
    pts = [(round(i * step, 1), round(pad + (1 - v) * (height - 2 * pad), 1))
           for i, v in enumerate(vals)]
    return {"width": width, "height": height,
            "points": " ".join(f"{x},{y}" for x, y in pts), "last": pts[-1]}


def trust_class(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "t-none"
    return "t-high" if v >= 0.75 else "t-mid" if v >= 0.5 else "t-low"


def source_href(fact: Mapping) -> str | None:
    """A link for a URL source, and for a commit of a GitHub/GitLab/Codeberg project."""
    src = fact.get("source") or {}
    loc = str(src.get("location") or "")
    if src.get("kind") == "url" and loc.startswith(("https://", "http://")):
        return loc
    project = str(fact.get("project") or "")
    if src.get("kind") == "commit" and loc and project.startswith(
            ("github.com/", "gitlab.com/", "codeberg.org/")):
        sha = loc.split()[0].split(":")[-1]
        if all(c in "0123456789abcdef" for c in sha.lower()) and 7 <= len(sha) <= 64:
            return f"https://{project}/commit/{sha}"
    return None


def age(at: Any) -> str:
    return render.ago(str(at) if at else None, datetime.now(UTC))


def _globals() -> dict[str, Any]:
    return {"trust_class": trust_class, "source_href": source_href, "age": age,
            "when": render.when, "matched_question": render.matched_question,
            "confirmed": render.confirmed,
            "timeline_what": render.timeline_what, "short": render.short,
            "sparkline": sparkline, "STATUSES": STATUSES, "SOURCE_KINDS": SOURCE_KINDS}


# --- facts -------------------------------------------------------------------------------


def _list_params(request: Request) -> dict[str, str]:
    q = request.query_params
    return {k: (q.get(k) or "").strip() for k in
            ("bank", "q", "category", "project", "status", "tag", "after")}


@get("/", sync_to_thread=False)
def index() -> Redirect:
    return Redirect("/facts", status_code=303)


@get("/facts", sync_to_thread=True)
def facts_page(request: Request) -> Template:
    """One bank's facts, newest first (a page of 25 by id cursor), or the hybrid search's
    hits when `q` is given, each with its match and companion mark."""
    dash = dash_of(request)
    f = _list_params(request)
    bank = _bank(dash, f["bank"])
    error = None
    hits: list[dict] | None = None
    rows: list[dict] = []
    cursor = None
    degraded = None
    try:
        if f["q"]:
            found = dash.client.search(f["q"], project=f["project"] or None, limit=25,
                                       banks=[bank])
            hits = [h for h in found["results"]
                    if (not f["status"] or h["fact"]["status"] == f["status"])
                    and (not f["category"] or h["fact"]["category"] == f["category"])
                    and (not f["tag"] or f["tag"] in h["fact"].get("tags", []))]
            degraded = (found.get("degraded") or {}).get(bank)
        else:
            params = {"order": "desc", "limit": PAGE_SIZE, "after": f["after"] or 0,
                      "category": f["category"] or None, "project": f["project"] or None,
                      "status": f["status"] or None, "tag": f["tag"] or None}
            data = dash.client._json("GET", RECALL, "/v1/facts", bank, params=params)
            rows, cursor = data["facts"], data.get("next_cursor")
    except FactbankError as exc:
        error = str(exc)
    base = {k: v for k, v in f.items() if v and k not in ("after",)}
    base["bank"] = bank
    return page(request, "facts.html", f=f, bank=bank, rows=rows, hits=hits,
                next_url=("/facts?" + urlencode({**base, "after": cursor})) if cursor else None,
                first_url=("/facts?" + urlencode(base)) if f["after"] else None,
                categories=dash.categories(bank), search_error=error, degraded=degraded,
                scopes=dash.scopes(bank))


def _duplicates(dash: Dash, bank: str, fact: dict) -> tuple[list[dict], str | None]:
    """The facts this one may duplicate (GET /v1/facts/{id}/duplicates: the write gate's
    near-duplicate rule on the stored embeddings), in one call."""
    try:
        out = dash.client._json("GET", RECALL, f"/v1/facts/{int(fact['id'])}/duplicates", bank)
    except FactbankError as exc:
        return [], str(exc)
    return out["duplicates"], None


@get("/facts/{bank:str}/{fact_id:int}", sync_to_thread=True)
def fact_page(request: Request, bank: str, fact_id: int) -> Template:
    """One fact: content, source, quote, tags, questions, its events with a trust sparkline,
    the supersede chain both ways, possible duplicates, and the actions its token allows."""
    dash = dash_of(request)
    bank = _bank(dash, bank)
    try:
        data = dash.client.history(fact_id, bank=bank)
    except FactbankError as exc:
        if exc.status == 404:
            raise NotFoundException(f"no fact {fact_id} in the {bank} bank") from None
        raise HTTPException(status_code=502, detail=str(exc)) from None
    fact = data["fact"]
    events = data.get("events", [])
    trail = [e["trust_after"] for e in events if e.get("trust_after") is not None]
    scopes = dash.scopes(bank)
    return page(request, "fact.html", bank=bank, fact=fact, events=events,
                spark=sparkline(trail) if trail else None, supersedes=data.get("supersedes", []),
                successors=data.get("successors", []), current=data.get("current"),
                scopes=scopes)


@get("/facts/{bank:str}/{fact_id:int}/duplicates", sync_to_thread=True)
def fact_duplicates(request: Request, bank: str, fact_id: int) -> Template:
    """The fact page's "may duplicate" list, a fragment htmx loads once the page is shown:
    the near-duplicate scan is the page's one costly query at 100k facts (the HNSW scan
    filtered to the fact's category and project), so the page does not wait for it."""
    dash = dash_of(request)
    bank = _bank(dash, bank)
    dupes, error = _duplicates(dash, bank, {"id": fact_id})
    return Template(template_name="_duplicates.html", context={
        "bank": bank, "duplicates": dupes, "duplicates_error": error})


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: str(v) for k, v in form.items() if k != security.CSRF_FIELD}


def _act(dash: Dash, bank: str, fact_id: int, action: str, form: Mapping[str, str]) -> str:
    """Run one action on a fact; returns what the flash says."""
    c = dash.client
    reason = form.get("reason", "").strip()
    if action == "confirm":
        c.confirm(fact_id, reason, bank=bank)
        return "confirmed"
    if action == "dispute":
        if not reason:
            raise FactbankError("a dispute needs a reason", status=422)
        c.dispute(fact_id, reason, bank=bank)
        return "disputed"
    if action == "tags":
        tags = [t.strip() for t in form.get("tags", "").split(",") if t.strip()]
        c.edit(fact_id, tags=tags, bank=bank)
        return "tags saved"
    if action == "delete":
        c.delete(fact_id, reason, bank=bank)
        return "deleted"
    if action == "purge":
        c._json("DELETE", INGEST, f"/v1/facts/{int(fact_id)}/purge", bank)
        return "purged"
    raise NotFoundException(f"no action {action!r}")


@post("/facts/{bank:str}/{fact_id:int}/{action:str}")
async def fact_action(request: Request, bank: str, fact_id: int, action: str) -> Redirect:
    dash = dash_of(request)
    bank = _bank(dash, bank)
    form = await _form(request)
    url = f"/facts/{bank}/{fact_id}"
    try:
        if action == "supersede":
            old = await asyncio.to_thread(dash.client.get, fact_id, bank=bank)
            tags = [t.strip() for t in form.get("tags", "").split(",") if t.strip()]
            body = new_fact(form.get("content", ""), form.get("category") or old["category"],
                            form.get("source_kind", "user"), form.get("location", ""),
                            form.get("quote", ""), tags=tags or old.get("tags", []),
                            project=old.get("project"), check_files=False)
            out = await asyncio.to_thread(dash.client.supersede, body, [fact_id],
                                          form.get("reason", ""), bank=bank)
            return back(f"/facts/{bank}/{out['fact']['id']}", done=f"superseded #{fact_id}")
        done = await asyncio.to_thread(_act, dash, bank, fact_id, action, form)
    except FactbankError as exc:
        return back(url, error=str(exc))
    if done == "purged":
        return back(f"/facts?bank={bank}", done=f"purged #{fact_id}")
    return back(url, done=done)


# --- timeline ------------------------------------------------------------------------------


def _timeline(dash: Dash, bank: str, project: str | None, since: str | None = None
              ) -> list[dict]:
    return dash.client.timeline(project=project, since=since, limit=200, banks=[bank])


@get("/timeline", sync_to_thread=True)
def timeline_page(request: Request) -> Template:
    """The project's timeline (all projects by default), conflicts highlighted, the open
    handoffs beside it; new events stream in (`/timeline/stream`)."""
    dash = dash_of(request)
    bank = _bank(dash, request.query_params.get("bank"))
    project = (request.query_params.get("project") or "").strip() or None
    error = None
    events: list[dict] = []
    handoffs: list[dict] = []
    try:
        events = _timeline(dash, bank, project)
        handoffs = dash.client.handoffs(project=project, open_only=True, bank=bank)
    except FactbankError as exc:
        error = str(exc)
    projects = sorted({e["project"] for e in events if e.get("project")})
    conflicts = [e for e in events if e.get("kind") == "conflict"]
    return page(request, "timeline.html", bank=bank, project=project or "", events=events,
                handoffs=handoffs, conflicts=conflicts, projects=projects,
                timeline_error=error, newest=events[0]["at"] if events else "")


@get("/timeline/stream")
async def timeline_stream(request: Request) -> ServerSentEvent:
    """New timeline events as rendered rows (`event: rows`), polled every POLL_SECONDS."""
    dash = dash_of(request)
    bank = _bank(dash, request.query_params.get("bank"))
    project = (request.query_params.get("project") or "").strip() or None
    since = request.query_params.get("since") or None
    engine = request.app.template_engine
    row = engine.get_template("_event.html")

    async def events() -> AsyncIterator[ServerSentEventMessage]:
        nonlocal since
        seen: set[Any] = set()
        while True:
            try:
                new = await asyncio.to_thread(_timeline, dash, bank, project, since)
            except FactbankError as exc:
                yield ServerSentEventMessage(event="status", data=f"offline: {exc}")
                await asyncio.sleep(POLL_SECONDS * 3)
                continue
            fresh = [e for e in reversed(new) if (e.get("id"), e.get("kind")) not in seen
                     and (since is None or str(e.get("at")) > since)]
            for e in fresh:
                seen.add((e.get("id"), e.get("kind")))
                since = max(since or "", str(e.get("at")))
            if fresh:
                html = "".join(row.render(e=e, **_globals()) for e in reversed(fresh))
                yield ServerSentEventMessage(event="rows", data=html.replace("\n", " "))
            else:
                yield ServerSentEventMessage(comment="idle")
            await asyncio.sleep(POLL_SECONDS)

    return ServerSentEvent(events())


# --- health --------------------------------------------------------------------------------


def _readyz(url: str, http: httpx.Client) -> dict:
    try:
        r = http.get(url + "/readyz", timeout=3.0)
        body: Any = r.json() if "json" in r.headers.get("content-type", "") else r.text
        return {"url": url, "status": r.status_code, "ok": r.status_code == 200, "body": body}
    except (httpx.HTTPError, ValueError) as exc:
        return {"url": url, "status": None, "ok": False, "body": str(exc) or type(exc).__name__}


def harnesses(home: Path | None = None) -> dict:
    """What `factbank install` wired on this machine (its manifest), how many factbank hooks
    each harness's files still hold (`installer.registered`), and whether Codex trusts
    factbank's hooks (`codex_trust.status`, which asks the codex binary when one is on PATH)."""
    from factbank_client.install import harnesses as installer

    paths = installer.Paths.from_env(home=home)
    manifest = installer.load_manifest(paths)
    codex: dict[str, str] | None = None
    if "codex" in manifest.get("harnesses", {}):
        try:
            from factbank_client.install import codex_trust

            codex = codex_trust.status(paths)
        except Exception as exc:  # codex missing or failing: say so, never fail the page
            codex = {"error": str(exc) or type(exc).__name__}
    wired = manifest.get("harnesses", {})
    hooks = {name: installer.registered(name, paths) for name in wired
             if name in installer.HARNESSES}
    return {"manifest_path": str(paths.manifest), "harnesses": wired, "codex": codex,
            "hooks": hooks}


@get("/health", sync_to_thread=True)
def health_page(request: Request) -> Template:
    dash = dash_of(request)
    # Every call at once (two readyz, two per bank): the page waits for the slowest, not
    # the sum.
    from concurrent.futures import ThreadPoolExecutor

    def bank_entry(bank: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"label": bank}
        try:
            entry["stats"] = dash.client.stats(banks=[bank])[bank]
            entry["growth"] = dash.client._json("GET", RECALL, "/v1/stats/growth", bank,
                                                params={"days": 30})["days"]
        except FactbankError as exc:
            entry["error"] = str(exc)
        return entry

    with ThreadPoolExecutor(max_workers=2 + len(dash.banks)) as pool:
        ready = [pool.submit(_readyz, u, dash.http)
                 for u in (dash.config.url, dash.config.recall_url)]
        entries = [pool.submit(bank_entry, b) for b in dash.banks]
        services = [("ingest", ready[0].result()), ("recall", ready[1].result())]
        banks = [e.result() for e in entries]
    try:
        wired = harnesses(dash.home)
    except Exception as exc:  # a broken manifest is shown, not a 500
        wired = {"error": str(exc)}
    return page(request, "health.html", services=services, bank_health=banks, wired=wired)


# --- banks and members (admin) ---------------------------------------------------------------


def _admin_view(dash: Dash, bank: str) -> dict:
    if "admin" not in dash.scopes(bank):
        return {"label": bank, "admin": False}
    try:
        data = dash.client._json("GET", INGEST, "/v1/admin/members", bank)
    except FactbankError as exc:
        return {"label": bank, "admin": True, "error": str(exc)}
    return {"label": bank, "admin": True, **data}


@get("/admin", sync_to_thread=True)
def admin_page(request: Request) -> Template:
    dash = dash_of(request)
    return page(request, "admin.html", views=[_admin_view(dash, b) for b in dash.banks],
                issued=None, verified=None)


@post("/admin/{bank:str}/{action:str}")
async def admin_action(request: Request, bank: str, action: str) -> Template | Redirect:
    """Issue, rotate, revoke a token or verify the audit chain. A new token is rendered in
    this answer only (never in a redirect URL, never stored by the dashboard)."""
    dash = dash_of(request)
    bank = _bank(dash, bank)
    form = await _form(request)
    c = dash.client
    issued = verified = None
    try:
        if action == "issue":
            scopes = [s for s in ("read", "write", "admin") if form.get(f"scope_{s}")]
            issued = await asyncio.to_thread(
                c._json, "POST", INGEST, "/v1/admin/tokens", bank,
                json_body={"member": form.get("member", ""), "scopes": scopes or ["read"],
                           "label": form.get("label", "")})
        elif action in ("rotate", "revoke"):
            token_id = int(form.get("token_id", "0") or 0)
            out = await asyncio.to_thread(
                c._json, "POST", INGEST, f"/v1/admin/tokens/{token_id}/{action}", bank)
            if action == "revoke":
                return back("/admin", done=f"revoked token {token_id}")
            issued = out
        elif action == "verify":
            verified = await asyncio.to_thread(
                c._json, "GET", INGEST, "/v1/admin/audit/verify", bank)
        else:
            raise NotFoundException(f"no action {action!r}")
    except FactbankError as exc:
        return back("/admin", error=str(exc))
    except ValueError:
        return back("/admin", error="token_id: not a number")
    views = await asyncio.to_thread(lambda: [_admin_view(dash, b) for b in dash.banks])
    return page(request, "admin.html", views=views, issued={**issued, "bank": bank}
                if issued else None, verified={**verified, "label": bank} if verified else None)


@get("/admin/{bank:str}/audit.jsonl")
async def audit_export(request: Request, bank: str) -> Stream:
    """The bank's audit chain as JSONL, streamed from the ingest service as it comes."""
    dash = dash_of(request)
    bank = _bank(dash, bank)
    headers = dash.client._headers(bank)
    url = dash.config.url + "/v1/admin/audit/export"

    async def body() -> AsyncIterator[bytes]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=3.0)) as http, \
                http.stream("GET", url, headers=headers) as r:
            if r.is_error:
                yield json.dumps({"error": r.status_code}).encode() + b"\n"
                return
            async for chunk in r.aiter_bytes():
                yield chunk

    return Stream(body(), media_type="application/x-ndjson", headers={
        "content-disposition": f'attachment; filename="audit-{bank}.jsonl"'})


# --- evals ---------------------------------------------------------------------------------


class EvalRun:
    """`factbank eval agent-memory` in a child process against a throwaway stack; its output
    is kept in memory (and streamed to the page) until the dashboard exits."""

    def __init__(self, run_id: str, argv: list[str], env: dict[str, str]) -> None:
        self.id = run_id
        self.argv = argv
        self.lines: list[str] = []
        self.code: int | None = None
        self.started = datetime.now(UTC)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, bufsize=1)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            # tqdm redraws with \r: keep the latest state of each line
            self.lines.append(line.rstrip("\n").split("\r")[-1])
        self.code = self.proc.wait()


def markdown_html(text: str) -> str:
    """The eval reports' Markdown as HTML: headings, pipe tables, fenced code and paragraphs,
    which is all `evals/report.py` writes. Every text is escaped first, so a report can carry
    no markup of its own (no Markdown library in the light client for this)."""
    from html import escape

    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre>" + escape("\n".join(lines[i + 1:j])) + "</pre>")
            i = j + 1
            continue
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(set(c) <= set("-: ") for c in cells):
                    rows.append(cells)
                i += 1
            head, *body = rows or [[]]
            out.append('<table class="md"><thead><tr>' + "".join(
                f"<th>{escape(c)}</th>" for c in head) + "</tr></thead><tbody>" + "".join(
                "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in body)
                + "</tbody></table>")
            continue
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 4)
            out.append(f"<h{level}>{escape(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{escape(line)}</p>")
        i += 1
    return "\n".join(out)


def _report_text(root: Path, path: Path) -> str | None:
    """A report's text, read only inside the reports folder (safefs: no link out of it)."""
    try:
        return safefs.read(root, path)[1].decode("utf-8", "replace")
    except (safefs.UnsafePath, OSError):
        return None


def latest_reports(root: Path | None) -> list[dict]:
    """The committed report folders, newest first, each with its text files and plots."""
    if root is None or not root.is_dir():
        return []
    out = []
    for folder in sorted((p for p in root.iterdir() if p.is_dir()), reverse=True):
        files = sorted(folder.iterdir())
        out.append({"name": folder.name,
                    "texts": [(f.name, markdown_html(text)) for f in files
                              if f.suffix == ".md" and (text := _report_text(root, f))
                              is not None],
                    "plots": [f.name for f in files if f.suffix == ".png"]})
    return out


def default_evals_dir() -> Path | None:
    """evals/reports of this checkout (the factbank_evals package's folder), found without
    importing the evals package (the light client has no numpy)."""
    import importlib.util

    spec = importlib.util.find_spec("factbank_evals")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent / "reports"


@get("/evals", sync_to_thread=True)
def evals_page(request: Request) -> Template:
    dash = dash_of(request)
    reports = latest_reports(dash.evals_dir)
    runs = sorted(dash.runs.values(), key=lambda r: r.started, reverse=True)
    return page(request, "evals.html", reports=reports[:2], runs=runs,
                current=request.query_params.get("run"))


@get("/evals/plot/{folder:str}/{name:str}", sync_to_thread=True)
def eval_plot(request: Request, folder: str, name: str) -> Response:
    dash = dash_of(request)
    root = dash.evals_dir
    if root is None or "/" in folder + name or not name.endswith(".png"):
        raise NotFoundException("no such plot")
    try:  # inside the reports folder, never through a link out of it
        data = safefs.read(root, f"{folder}/{name}")[1]
    except (safefs.UnsafePath, OSError):
        raise NotFoundException("no such plot") from None
    return Response(data, media_type="image/png")


@post("/evals/run")
async def eval_run(request: Request) -> Redirect:
    """Start `factbank eval agent-memory --per-kind N` in a child process (it brings up its
    own throwaway stack: the user's banks are never touched)."""
    dash = dash_of(request)
    form = await _form(request)
    try:
        per_kind = max(1, min(int(form.get("per_kind") or 20), 10_000))
    except ValueError:
        return back("/evals", error="per_kind: not a number")
    run_id = f"run{len(dash.runs) + 1}"
    argv = [sys.executable, "-m", "factbank_client.cli.main", "eval", "agent-memory",
            "--per-kind", str(per_kind)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    dash.runs[run_id] = EvalRun(run_id, argv, env)
    return back("/evals", run=run_id)


@get("/evals/run/{run_id:str}/stream")
async def eval_stream(request: Request, run_id: str) -> ServerSentEvent:
    dash = dash_of(request)
    run = dash.runs.get(run_id)
    if run is None:
        raise NotFoundException(f"no run {run_id!r}")

    async def lines() -> AsyncIterator[ServerSentEventMessage]:
        sent = 0
        while True:
            while sent < len(run.lines):
                yield ServerSentEventMessage(event="line", data=run.lines[sent])
                sent += 1
            if run.code is not None and sent >= len(run.lines):
                yield ServerSentEventMessage(event="done", data=f"exit code {run.code}")
                return
            await asyncio.sleep(0.5)

    return ServerSentEvent(lines())


# --- the app -------------------------------------------------------------------------------


def _not_found(request: Request, exc: Exception) -> Response:
    detail = getattr(exc, "detail", "") or "not found"
    status = getattr(exc, "status_code", 500)
    engine = request.app.template_engine
    html = engine.get_template("error.html").render(
        status=status, detail=detail, csrf="", banks=[], nav="", **_globals())
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
    from factbank_client.dashboard import dispatch_page

    dash = Dash(config, keys, evals_dir=evals_dir if evals_dir is not None
                else default_evals_dir(), home=home, dispatch_dir=dispatch_dir,
                dispatch_env=dispatch_env, dispatch_binaries=dispatch_binaries)
    templates = TemplateConfig(directory=HERE / "templates", engine=JinjaTemplateEngine)
    app = Litestar(
        route_handlers=[*ROUTES, *dispatch_page.ROUTES, *extra_routes,
                        create_static_files_router(path="/static", directories=[HERE / "static"])],
        template_config=templates,
        state=State({"dash": dash}),
        exception_handlers={HTTPException: _not_found},
        on_shutdown=[lambda: dash.http.close()],
        openapi_config=None,
        # Litestar's default logging config puts the root logger at INFO with a handler, so
        # every call the dashboard made printed an httpx "HTTP Request" line in its terminal
        # (issue 21 B5). Without it, only warnings and errors reach the terminal.
        logging_config=None,
    )
    env = templates.engine_instance.engine
    env.globals.update(_globals())
    env.autoescape = True
    return security.Gate(app, keys, security.allowed_hosts(port))
