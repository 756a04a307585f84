"""The admin routes: a bank's members and tokens, its audit chain, over HTTP.

`factbank admin` works on the database directly (services/factbank/cli/admin.py), which only
the server's operator can do; the dashboard runs on a member's own machine and has only its
configured tokens, so it needs these. Each route is a thin call into `factbank.store.banks`
or `factbank.store.audit`, guarded by the `admin` scope, and sees only the token's own bank:
a token id of another bank is a 404, like a fact id. A new token is in the answer once (the
store keeps its hash only); a label is redacted by the store; a member name that looks like a
secret is refused naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

import msgspec
from litestar import Router, get, post
from litestar.params import FromPath, JSONBody, Parameter
from litestar.response import Stream

from factbank.errors import NotFound, Refused
from factbank.runtime.web.auth import requires
from factbank.store import audit, banks
from factbank.store.banks import Principal
from factbank.write.deps import Deps

MEMBER_NAME = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


class NewToken(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A token for a member of the caller's bank (the member is created on first use)."""

    member: MEMBER_NAME
    scopes: Annotated[list[str], msgspec.Meta(min_length=1, max_length=3)] = msgspec.field(
        default_factory=lambda: ["read", "write"]
    )
    label: Annotated[str, msgspec.Meta(max_length=200)] = ""


def _info(info: banks.TokenInfo) -> dict:
    return dataclasses.asdict(info)


async def _own_token(conn, principal: Principal, token_id: int) -> banks.TokenInfo:
    info = await banks.get_token(conn, token_id)
    if info.bank != principal.bank_name:
        raise NotFound(f"no token with id {token_id}")
    return info


@get("/v1/admin/members")
async def list_members(deps: Deps, principal: Principal) -> dict:
    """This bank's members (live tokens, last use) and every token it issued, newest last;
    a token is listed by id and prefix, never in full."""
    async with deps.pool.acquire() as conn:
        members = await banks.list_members(conn, principal.bank_id)
        tokens = await banks.list_tokens(conn, principal.bank_name)
    return {"bank": principal.bank_name, "members": members, "tokens": [_info(t) for t in tokens]}


@post("/v1/admin/tokens", status_code=201,
      opt={"example": {"member": "ana", "scopes": ["read", "write"], "label": "laptop"}})
async def issue_token(deps: Deps, principal: Principal, data: JSONBody[NewToken]) -> dict:
    """Issue a token for a member of this bank; the token itself is in this answer only."""
    try:
        scopes = banks.parse_scopes(data.scopes)
    except ValueError as exc:
        raise Refused.one("scopes", str(exc)) from None
    async with deps.pool.acquire() as conn:
        try:
            info, token = await banks.issue_token(
                conn, principal.bank_name, data.member, scopes, data.label,
                actor=principal.actor(),
            )
        except ValueError as exc:
            raise Refused.one("member", str(exc)) from None
    return {**_info(info), "token": token}


@post("/v1/admin/tokens/{token_id:int}/rotate", status_code=200, opt={"example": {}})
async def rotate_token(deps: Deps, principal: Principal, token_id: FromPath[int]) -> dict:
    """Revoke a token of this bank and issue its replacement (shown once), in one step."""
    async with deps.pool.acquire() as conn:
        await _own_token(conn, principal, token_id)
        info, token = await banks.rotate_token(conn, token_id, actor=principal.actor())
    return {**_info(info), "token": token, "replaces": token_id}


@post("/v1/admin/tokens/{token_id:int}/revoke", status_code=200, opt={"example": {}})
async def revoke_token(deps: Deps, principal: Principal, token_id: FromPath[int]) -> dict:
    """Revoke a token of this bank: its next request is refused (authentication reads the
    token row on every request)."""
    async with deps.pool.acquire() as conn:
        await _own_token(conn, principal, token_id)
        return _info(await banks.revoke_token(conn, token_id, actor=principal.actor()))


@get("/v1/admin/audit/verify")
async def verify_audit(deps: Deps, principal: Principal) -> dict:
    """Walk this bank's audit chain: `ok`, rows verified, and each row whose link or hash
    does not hold."""
    async with deps.pool.acquire() as conn:
        head = await audit.Heads(deps.settings.audit_head_path).entry(conn)
        problems = await audit.verify(conn, principal.bank_id, head)
        count = await audit.count(conn, principal.bank_id)
    return {"bank": principal.bank_name, "rows": count, "ok": not problems,
            "head": ((head or {}).get("chains") or {}).get(str(principal.bank_id)),
            "problems": [dataclasses.asdict(p) for p in problems],
            "verified_at": datetime.now().astimezone().isoformat()}


@get("/v1/admin/audit/export")
async def export_audit(
    deps: Deps, principal: Principal,
    limit: int = Parameter(default=0, ge=0, le=1_000_000, description="0: every row"),
) -> Stream:
    """This bank's audit chain as JSONL in chain order, with each row's hashes (what
    `factbank admin audit export` writes), streamed. The last line is the chain's head as
    recorded outside the database (`{"audit_head": {"id", "hash", "at"}}`, or null)."""
    bank_id = principal.bank_id

    async def lines() -> AsyncIterator[bytes]:
        n = 0
        async with deps.pool.acquire() as conn:
            head = await audit.Heads(deps.settings.audit_head_path).entry(conn)
            async for row in audit.rows(conn, bank_id):
                yield msgspec.json.encode(audit.export_record(row)) + b"\n"
                n += 1
                if limit and n >= limit:
                    break
        chain = ((head or {}).get("chains") or {}).get(str(bank_id))
        yield msgspec.json.encode({"audit_head": chain}) + b"\n"

    return Stream(lines(), media_type="application/x-ndjson")


ADMIN = Router(
    "/",
    guards=[requires("admin")],
    route_handlers=[list_members, issue_token, rotate_token, revoke_token, verify_audit,
                    export_audit],
)
