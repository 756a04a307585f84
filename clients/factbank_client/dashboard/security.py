"""The dashboard's gate, as Jupyter guards its own server: no new auth surface on factbank.

The dashboard listens on 127.0.0.1 and holds the user's bank tokens, so any page that can
reach it must not be able to use it. Three checks, in this order, on every request (assets
included: a page that loads our script could otherwise read what it renders):

1. **Host.** The Host header must be this server's own loopback name and port. A page on
   `evil.example` that rebinds its DNS to 127.0.0.1 still sends `Host: evil.example`; it is
   refused (403) before anything else runs (DNS rebinding).
2. **Launch token, then cookie.** `factbank dashboard` makes a random token per launch and
   opens `/?token=...`. A request carrying the right token gets an HttpOnly, SameSite=Strict
   session cookie (a second random value: the URL token never becomes the credential stored
   in the browser) and a redirect to the same URL without the token, so it does not stay in
   the address bar or the history. Without a valid cookie: 403 with a page saying how to get
   in. Tokens are compared in constant time.
3. **CSRF on every POST** (and any other unsafe method): the form field `csrf` or the header
   `X-CSRF-Token` (htmx sends it, from the `<body hx-headers>`) must equal this launch's CSRF
   value, and an `Origin`, when the browser sends one, must be our own. SameSite=Strict
   alone would stop most cross-site posts; the token also stops a same-site page on another
   loopback port.

Everything is per launch and in memory: restarting the dashboard logs every browser out.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

COOKIE = "factbank_dashboard"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A form body is read at most this far to find the CSRF field (bigger posts use the header).
MAX_FORM = 256 * 1024

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class Secrets:
    """This launch's three values: the URL token, the cookie's session value, the CSRF."""

    def __init__(self, launch: str | None = None) -> None:
        self.launch = launch or secrets.token_urlsafe(32)
        self.session = secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)


def local_url(url: str) -> str:
    """`url` as a path on this dashboard, for every redirect it sends.

    A launch URL `//evil.example/?token=...` gave the path `//evil.example/`, and a redirect
    to it is protocol-relative: the browser left for evil.example. So the path is
    percent-encoded (a tab, newline or backslash that a browser drops or reads as `/` becomes
    `%09`, `%0A`, `%5C`) and its leading slashes collapse to one: whatever the path, the
    Location starts with one `/` and a character that is not `/`. The query is kept as is."""
    path, sep, query = url.partition("?")
    path = "/" + quote(path, safe="/:@!$&'()*+,;=-._~%").lstrip("/")
    return path + sep + quote(query, safe="/:@!$&'()*+,;=-._~%?")


def allowed_hosts(port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host values this server answers: its loopback names with the port."""
    names = ("127.0.0.1", "localhost", "[::1]", *extra)
    return frozenset(f"{n}:{port}".lower() for n in names)


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def _plain(send: Send, status: int, text: str, headers: list | None = None) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


DENIED = """<!doctype html><meta charset="utf-8"><title>factbank dashboard</title>
<style>body{font:16px system-ui,sans-serif;margin:15vh auto;max-width:34rem;color:#1f2937}
code{background:#f3f4f6;padding:.1em .3em;border-radius:4px}</style>
<h1>{title}</h1><p>{text}</p>"""


def denied(title: str, text: str) -> str:
    return DENIED.replace("{title}", title).replace("{text}", text)


class Gate:
    """ASGI middleware in front of the dashboard app (see the module docstring)."""

    def __init__(self, app: Callable, keys: Secrets, hosts: frozenset[str]) -> None:
        self.app = app
        self.keys = keys
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if headers.get("host", "").lower() not in self.hosts:
            await _plain(send, 403, denied("Wrong host", "This dashboard answers only on its "
                         "own loopback address (the Host header did not match)."))
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            if not _same(query["token"], self.keys.launch):
                await _plain(send, 403, denied("Wrong token", "This link is from another "
                             "launch. Open the URL <code>factbank dashboard</code> printed."))
                return
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            location = local_url(scope.get("path", "/") + (f"?{rest}" if rest else ""))
            cookie = (f"{COOKIE}={self.keys.session}; HttpOnly; SameSite=Strict; Path=/")
            await _plain(send, 303, "", [(b"location", location.encode()),
                                         (b"set-cookie", cookie.encode())])
            return
        jar = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is no cookie
            jar = SimpleCookie()
        morsel = jar.get(COOKIE)
        if not _same(morsel.value if morsel else None, self.keys.session):
            await _plain(send, 403, denied("Not signed in", "Open the URL that <code>factbank "
                         "dashboard</code> printed (it carries this launch's token)."))
            return
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin and origin.lower().partition("://")[2] not in self.hosts:
                await _plain(send, 403, denied("Cross-origin request", "Refused."))
                return
            if not _same(headers.get(CSRF_HEADER), self.keys.csrf):
                body, receive = await _buffer(receive)
                form = dict(parse_qsl(body[:MAX_FORM].decode("utf-8", "replace")))
                if not _same(form.get(CSRF_FIELD), self.keys.csrf):
                    await _plain(send, 403, denied("Missing CSRF token", "Reload the page "
                                 "and try again."))
                    return
        await self.app(scope, receive, send)


async def _buffer(receive: Receive) -> tuple[bytes, Receive]:
    """Read the whole body, and a `receive` that replays it to the app."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay
