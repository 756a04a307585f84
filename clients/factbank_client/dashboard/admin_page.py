"""Banks and members (admin): members and tokens, token actions, the audit chain's check and
export."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

from litestar import Request, get, post
from litestar.exceptions import NotFoundException
from litestar.response import Redirect, Stream, Template

from factbank_client.dashboard.base import Dash, back, dash_of, form_fields, page, pick_bank
from factbank_client.errors import FactbankError


def _admin_view(dash: Dash, bank: str) -> dict:
    if "admin" not in dash.scopes(bank):
        return {"label": bank, "admin": False}
    try:
        data = dash.client.members(bank)
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
    bank = pick_bank(dash, bank)
    form = await form_fields(request)
    c = dash.client
    issued = verified = None
    try:
        if action == "issue":
            scopes = [s for s in ("read", "write", "admin") if form.get(f"scope_{s}")]
            issued = await asyncio.to_thread(
                c.issue_token, form.get("member", ""), scopes or ["read"],
                form.get("label", ""), bank=bank)
        elif action in ("rotate", "revoke"):
            token_id = int(form.get("token_id", "0") or 0)
            if action == "revoke":
                await asyncio.to_thread(c.revoke_token, token_id, bank=bank)
                return back("/admin", done=f"revoked token {token_id}")
            issued = await asyncio.to_thread(c.rotate_token, token_id, bank=bank)
        elif action == "verify":
            verified = await asyncio.to_thread(c.verify_audit, bank)
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
    """The bank's audit chain as JSONL, streamed from the ingest service as it comes (Litestar
    reads a plain iterator in a worker thread, chunk by chunk). A refusal is the last line."""
    dash = dash_of(request)
    bank = pick_bank(dash, bank)

    def body() -> Iterator[bytes]:
        try:
            yield from dash.client.audit_export(bank)
        except FactbankError as exc:
            yield json.dumps({"error": exc.status or str(exc)}).encode() + b"\n"

    return Stream(body(), media_type="application/x-ndjson", headers={
        "content-disposition": f'attachment; filename="audit-{bank}.jsonl"'})
