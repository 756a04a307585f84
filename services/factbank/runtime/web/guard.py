"""The input guard: a request whose headers, path, query or body hold a value the database
cannot take (a NUL, an integer beyond int64, bytes that are not UTF-8, JSON nested too deeply)
is a 400 naming it, before any handler runs."""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from factbank.errors import BadInput

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")



def check_value(value: Any, where: str = "body") -> None:
    """Every string free of NUL (Postgres text cannot hold one) and every integer within int64
    (every id, cursor and count is a bigint), walked without recursion. Raises BadInput."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                raise BadInput(f"{path}: the NUL character (\\u0000) is not allowed")
        elif isinstance(v, bool):
            continue
        elif isinstance(v, int):
            if not INT64_MIN <= v <= INT64_MAX:
                raise BadInput(f"{path}: integer {v} is out of range (64-bit signed)")
        elif isinstance(v, dict):
            for k, item in v.items():
                if isinstance(k, str) and "\x00" in k:
                    raise BadInput(f"{path}: the NUL character (\\u0000) is not allowed in a key")
                stack.append((f"{path}.{k}" if path else str(k), item))
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(v))


def header_text(scope: dict, name: bytes) -> str:
    """A header's value as the text its sender wrote: HTTP gives bytes, and the ASGI servers'
    str view decodes them as latin-1, which stored a UTF-8 `X-Factbank-Agent: 小明的 claude`
    as mojibake. Decoded as UTF-8 here; InputGuard has already refused a value
    that is not UTF-8 (400 naming the header)."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("utf-8", "replace")
    return ""


def check_utf8(data: bytes, where: str = "body") -> None:
    """One rule for every request body, JSON or JSONL: bytes that are not
    UTF-8 are a 400 naming the line (or the body) and the byte, never replaced with U+FFFD
    (an import did that silently while `/v1/facts` refused the same bytes)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start]
        line = len((head + b"x").splitlines())
        lines = data.rstrip(b"\r\n").splitlines()
        start = len(b"".join(head.splitlines(keepends=True)[: line - 1]))
        at = f"line {line}" if len(lines) > 1 else where
        raise BadInput(f"{at}: not valid UTF-8 (byte {exc.start - start + 1}"
                       f"{' of the line' if len(lines) > 1 else ''}: "
                       f"0x{data[exc.start]:02x})") from None


def check_json(body: bytes, where: str = "body") -> None:
    """`check_value` over a JSON body, or over each line of JSONL; what does not parse is left
    to the route, which names it. Nesting deeper than the decoder allows is a BadInput; bytes
    that are not UTF-8 are one too (`check_utf8`)."""
    check_utf8(body, where)
    try:
        check_value(msgspec.json.decode(body), where)
        return
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply") from None
    except msgspec.DecodeError:
        pass
    for n, line in enumerate(body.splitlines(), 1):
        try:
            value = msgspec.json.decode(line)
        except RecursionError:
            raise BadInput(f"line {n}: JSON nested too deeply") from None
        except msgspec.DecodeError:
            continue
        check_value(value, f"line {n}")


def _int_params(handler: Any) -> set[str]:
    """Names of a handler's int-typed parameters (query and path)."""
    names = getattr(handler, "_factbank_int_params", None)
    if names is None:
        names = set()
        for name, fd in handler.parsed_fn_signature.parameters.items():
            try:
                if fd.is_subclass_of(int) or fd.has_inner_subclass_of(int):
                    names.add(name)
            except TypeError:
                continue
        handler._factbank_int_params = names
    return names


class InputGuard:
    """ASGI middleware, once for both services: a request whose headers, path, query or body
    hold a value the database cannot take is a 400 naming it, before any handler runs, so
    nothing is written (principle: bad input is a 4xx, never a 500).

    With `body=False` it checks headers, path parameters and the query string (it runs before
    authentication, which reads a header); with `body=True` (after authentication) it buffers
    the body up to the route's own size limit, checks it, and replays it to the handler."""

    def __init__(self, app: Any, body: bool = False) -> None:
        self.app = app
        self.body = body

    @staticmethod
    async def _refuse(send: Any, message: str) -> None:
        payload = msgspec.json.encode({"status_code": 400, "detail": message})
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    def _check_request_line(self, scope: dict) -> None:
        for name, value in scope.get("headers", []):
            if b"\x00" in value:
                raise BadInput(f"header {name.decode('latin-1')}: the NUL character is not allowed")
            if name.lower() == b"x-factbank-agent":  # stored text: UTF-8 or refused
                check_utf8(value, "header X-Factbank-Agent")
            if name.lower() == b"x-factbank-session":
                check_utf8(value, "header X-Factbank-Session")
        if "\x00" in scope.get("path", ""):
            raise BadInput("path: the NUL character is not allowed")
        for name, value in (scope.get("path_params") or {}).items():
            check_value(value, name)
        query = scope.get("query_string", b"").decode("latin-1")
        handler = scope.get("route_handler")
        ints = _int_params(handler) if handler is not None else set()
        for name, value in parse_qsl(query, keep_blank_values=True):
            if "\x00" in name or "\x00" in value:
                raise BadInput(f"query {name!r}: the NUL character is not allowed")
            if name in ints and NUMBER.match(value):
                try:
                    number = float(value)
                except (ValueError, OverflowError):
                    number = float("inf")
                if not INT64_MIN <= number <= INT64_MAX:
                    raise BadInput(f"{name}: {value} is out of range (64-bit signed)")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            if not self.body:
                self._check_request_line(scope)
                await self.app(scope, receive, send)
                return
        except BadInput as exc:
            await self._refuse(send, str(exc))
            return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        handler = scope.get("route_handler")
        try:
            limit = handler.resolve_request_max_body_size() if handler is not None else None
        except Exception:
            limit = None
        limit = limit or 1 << 20
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self.app(scope, receive, send)  # litestar answers 413 without reading it
            return
        chunks: list[bytes] = []
        size, more, last = 0, True, None
        while more:
            message = await receive()
            if message["type"] != "http.request":
                last = message
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > limit:
                break
        body = b"".join(chunks)
        if size <= limit and last is None and body.strip():
            try:
                # Off the event loop: a 32 MiB import decodes for a while.
                await asyncio.to_thread(check_json, body)
            except BadInput as exc:
                await self._refuse(send, str(exc))
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                if last is not None:
                    return last
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        await self.app(scope, replay, send)
