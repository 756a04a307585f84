"""The facts pages: the list and search, one fact with its history and duplicates, and the
actions on it (confirm, dispute, supersede, delete, purge)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import urlencode

from litestar import Request, get, post
from litestar.exceptions import HTTPException, NotFoundException
from litestar.response import Redirect, Template

from factbank_client.client import new_fact
from factbank_client.dashboard.base import (
    PAGE_SIZE,
    Dash,
    back,
    dash_of,
    form_fields,
    form_tags,
    list_params,
    page,
    pick_bank,
    sparkline,
)
from factbank_client.errors import FactbankError


@get("/", sync_to_thread=False)
def index() -> Redirect:
    return Redirect("/facts", status_code=303)


@get("/facts", sync_to_thread=True)
def facts_page(request: Request) -> Template:
    """One bank's facts, newest first (a page of 25 by id cursor), or the hybrid search's
    hits when `q` is given, each with its match and companion mark."""
    dash = dash_of(request)
    f = list_params(request)
    bank = pick_bank(dash, f["bank"])
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
            data = dash.client.facts_page(
                bank, order="desc", limit=PAGE_SIZE, after=f["after"] or 0,
                category=f["category"] or None, project=f["project"] or None,
                status=f["status"] or None, tag=f["tag"] or None)
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
        return dash.client.duplicates(int(fact["id"]), bank=bank), None
    except FactbankError as exc:
        return [], str(exc)


@get("/facts/{bank:str}/{fact_id:int}", sync_to_thread=True)
def fact_page(request: Request, bank: str, fact_id: int) -> Template:
    """One fact: content, source, quote, tags, questions, its events with a trust sparkline,
    the supersede chain both ways, possible duplicates, and the actions its token allows."""
    dash = dash_of(request)
    bank = pick_bank(dash, bank)
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
    bank = pick_bank(dash, bank)
    dupes, error = _duplicates(dash, bank, {"id": fact_id})
    return Template(template_name="_duplicates.html", context={
        "bank": bank, "duplicates": dupes, "duplicates_error": error})


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
        tags = form_tags(form)
        c.edit(fact_id, tags=tags, bank=bank)
        return "tags saved"
    if action == "delete":
        c.delete(fact_id, reason, bank=bank)
        return "deleted"
    if action == "purge":
        c.purge(fact_id, bank=bank)
        return "purged"
    raise NotFoundException(f"no action {action!r}")


@post("/facts/{bank:str}/{fact_id:int}/{action:str}")
async def fact_action(request: Request, bank: str, fact_id: int, action: str) -> Redirect:
    dash = dash_of(request)
    bank = pick_bank(dash, bank)
    form = await form_fields(request)
    url = f"/facts/{bank}/{fact_id}"
    try:
        if action == "supersede":
            old = await asyncio.to_thread(dash.client.get, fact_id, bank=bank)
            tags = form_tags(form)
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
