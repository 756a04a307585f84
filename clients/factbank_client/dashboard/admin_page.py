"""Banks and members (admin): members and tokens, token actions, the audit chain's check and
export."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
from litestar import Request, get, post
from litestar.exceptions import NotFoundException
from litestar.response import Redirect, Stream, Template

from factbank_client.client import INGEST
from factbank_client.dashboard.base import Dash, back, dash_of, form_fields, page, pick_bank
from factbank_client.errors import FactbankError


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
    bank = pick_bank(dash, bank)
    form = await form_fields(request)
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
    bank = pick_bank(dash, bank)
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
