"""The dashboard's review queue: every candidate fact waiting for a person (successors
`verify` proposed when a commit changed a quoted line, corrections agents queued), with the
quote as it was and as it is now; accept (after editing the claim, tags or questions) or
reject, as the token's scopes allow. The server's write/queue.py says what each does."""

from __future__ import annotations

import asyncio

from litestar import Request, get, post
from litestar.response import Redirect, Template

from factbank_client.dashboard.base import (
    back,
    dash_of,
    form_fields,
    form_tags,
    page,
    pick_bank,
)
from factbank_client.errors import FactbankError

STATUSES = ("pending", "accepted", "rejected", "withdrawn", "all")


@get("/queue", sync_to_thread=True)
def queue_page(request: Request) -> Template:
    dash = dash_of(request)
    bank = pick_bank(dash, request.query_params.get("bank"))
    status = request.query_params.get("status") or "pending"
    status = status if status in STATUSES else "pending"
    error, rows = None, []
    try:
        rows = dash.client.queue_list(status=status, banks=[bank])
    except FactbankError as exc:
        error = str(exc)
    return page(request, "queue.html", bank=bank, status=status, statuses=STATUSES,
                rows=rows, queue_error=error, scopes=dash.scopes(bank))


def _lines(text: str) -> list[str]:
    return [x.strip() for x in text.replace("\r", "").split("\n") if x.strip()]


@post("/queue/{bank:str}/{cand_id:int}/{action:str}")
async def queue_action(request: Request, bank: str, cand_id: int, action: str) -> Redirect:
    dash = dash_of(request)
    bank = pick_bank(dash, bank)
    form = await form_fields(request)
    url = f"/queue?bank={bank}"
    try:
        if action == "accept":
            edits: dict = {}
            if form.get("content", "").strip():
                edits["content"] = form["content"].strip()
            tags = form_tags(form)
            if tags:
                edits["tags"] = tags
            questions = _lines(form.get("questions", ""))
            if questions:
                edits["questions"] = questions
            out = await asyncio.to_thread(dash.client.queue_accept, cand_id, edits=edits or None,
                                          bank=bank)
            new = out["outcome"]["fact"]["id"]
            return back(f"/facts/{bank}/{new}", done=f"accepted candidate {cand_id}")
        if action == "reject":
            await asyncio.to_thread(dash.client.queue_reject, cand_id, form.get("reason", ""),
                                    bank=bank)
            return back(url, done=f"rejected candidate {cand_id}")
    except FactbankError as exc:
        return back(url, error=str(exc))
    return back(url, error=f"no action {action!r}")


ROUTES = [queue_page, queue_action]
