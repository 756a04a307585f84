"""A tiny blocking JSON-over-HTTP POST for the hooks, standard library only.

Why not urllib/httpx: a hook runs as a fresh process on every prompt, and importing
`urllib.request` (email, http.client, ssl) costs more than the whole rest of the hook. Plain
`http://` (the usual case: the services sit on a private Tailscale address) goes over a raw
socket; only `https://` pays for `http.client` + `ssl`, imported when first needed.

Every call takes an absolute `deadline` (time.monotonic()): no socket operation may outlast
it, so a service that accepts and never answers costs the hook at most the remaining budget.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

from factbank_client.errors import HttpError


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise HttpError("deadline passed")
    return left


def post_json(url: str, body: Any, headers: dict[str, str], deadline: float) -> Any:
    """POST `body` as JSON to `url`; return the decoded JSON answer or raise HttpError."""
    parts = urlsplit(url)
    payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
    if parts.scheme == "https":
        return _post_https(parts, payload, headers, deadline)
    if parts.scheme != "http" or not parts.hostname:
        raise HttpError(f"unsupported URL {url!r}")
    port = parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.netloc.rsplit("@", 1)[-1]
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host_header}",
        "Content-Type: application/json",
        "Accept: application/json",
        f"Content-Length: {len(payload)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + payload
    try:
        with socket.create_connection((parts.hostname, port), timeout=_remaining(deadline)) as s:
            s.settimeout(_remaining(deadline))
            s.sendall(request)
            chunks: list[bytes] = []
            while True:
                s.settimeout(_remaining(deadline))
                data = s.recv(65536)
                if not data:
                    break
                chunks.append(data)
                if _complete(b"".join(chunks)):
                    break
    except OSError as exc:  # includes socket.timeout / ConnectionRefusedError
        raise HttpError(f"{type(exc).__name__}: {exc}") from exc
    return _parse_response(b"".join(chunks))


def _split_head(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise HttpError("truncated response head")
    head_lines = head.decode("iso-8859-1").split("\r\n")
    try:
        status = int(head_lines[0].split(" ", 2)[1])
    except (IndexError, ValueError) as exc:
        raise HttpError(f"bad status line {head_lines[0]!r}") from exc
    fields: dict[str, str] = {}
    for line in head_lines[1:]:
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip()
    return status, fields, rest


def _complete(raw: bytes) -> bool:
    """True once a whole response (by Content-Length or final chunk) has arrived, so a server
    that keeps the connection open despite `Connection: close` costs nothing extra."""
    try:
        _, fields, rest = _split_head(raw)
    except HttpError:
        return False
    if "content-length" in fields:
        try:
            return len(rest) >= int(fields["content-length"])
        except ValueError:
            return False
    if "chunked" in fields.get("transfer-encoding", "").lower():
        return rest.endswith(b"0\r\n\r\n")
    return False


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while True:
        size_line, sep, data = data.partition(b"\r\n")
        if not sep:
            raise HttpError("truncated chunked body")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return bytes(out)
        out += data[:size]
        data = data[size + 2:]


def _parse_response(raw: bytes) -> Any:
    status, fields, body = _split_head(raw)
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    elif "content-length" in fields:
        body = body[: int(fields["content-length"])]
    return _decode(status, body)


def _decode(status: int, body: bytes) -> Any:
    if not 200 <= status < 300:
        raise HttpError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HttpError(f"answer is not JSON: {exc}") from exc


def _post_https(parts: Any, payload: bytes, headers: dict[str, str], deadline: float) -> Any:
    import http.client  # only https pays for http.client + ssl
    import ssl

    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn = http.client.HTTPSConnection(
        parts.hostname, parts.port or 443, timeout=_remaining(deadline),
        context=ssl.create_default_context(),
    )
    try:
        conn.request("POST", path, body=payload, headers={
            "Content-Type": "application/json", "Accept": "application/json", **headers})
        if conn.sock is not None:
            conn.sock.settimeout(_remaining(deadline))
        response = conn.getresponse()
        body = response.read()
        return _decode(response.status, body)
    except OSError as exc:
        raise HttpError(f"{type(exc).__name__}: {exc}") from exc
    except http.client.HTTPException as exc:
        raise HttpError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()
