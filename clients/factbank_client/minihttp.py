"""A tiny blocking JSON-over-HTTP POST for the hooks, standard library only.

Why not urllib/httpx: a hook runs as a fresh process on every prompt, and importing
`urllib.request` (email, http.client, ssl) costs more than the whole rest of the hook. Plain
`http://` (the usual case: the services sit on a private Tailscale address) goes over a raw
socket; only `https://` pays for `http.client` + `ssl`, imported when first needed.

Every call takes an absolute `deadline` (time.monotonic()): no socket operation may outlast
it, so a service that accepts and never answers costs the hook at most the remaining budget.
"""

from __future__ import annotations

import time

from factbank_client import lightjson
from factbank_client.errors import HttpError

TYPE_CHECKING = False  # not `typing`'s: typing costs the prompt hook ~5 ms of CPU
if TYPE_CHECKING:
    from typing import Any

# What a URL may hold for the fast split below: a service URL as config.normalize_url writes
# it. Anything else (user@, IPv6 brackets, a fragment, spaces, non-ASCII) goes to urlsplit.
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise HttpError("deadline passed")
    return left


def split_url(url: str) -> tuple[str, str | None, int | None, str, str]:
    """(scheme, host, port, path with query, netloc) as `urllib.parse.urlsplit` gives them.
    `urllib.parse` is imported only for a URL off the plain `http://host:port/path` shape:
    it brings `re`, `ipaddress` and `collections`, 12 ms of CPU in a fresh `python -I -S`
    (median of 21 on the 2-core box), more than the bare interpreter's 11 ms."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if "?" in netloc:
        netloc, _, query = netloc.partition("?")
        tail, slash = "?" + query + slash + tail, ""
    host, colon, port = netloc.partition(":")
    if (sep and scheme in ("http", "https") and url.isascii() and host
            and set(host) <= _HOST_CHARS and "#" not in tail
            and all(" " < c < "\x7f" for c in tail)
            and (not colon or (port.isdigit() and int(port) <= 65535))):
        path, _, query = (slash + tail).partition("?")
        return (scheme, host.lower(), int(port) if colon else None,
                (path or "/") + (f"?{query}" if query else ""), netloc)
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return (parts.scheme, parts.hostname, parts.port,
            (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), parts.netloc)


def _connect(host: str, port: int, timeout: float) -> Any:
    """socket.create_connection((host, port), timeout), on `_socket` itself: `socket` wraps
    it in IntEnums (`enum`, `selectors`: 10 ms of CPU in a fresh process, median of 21). The
    host goes to getaddrinfo as bytes when it is ASCII: a str is encoded with the `idna`
    codec, which loads `encodings.idna`, `stringprep` and `unicodedata` (~2 ms)."""
    import _socket

    name = host.encode("ascii") if host.isascii() else host
    errors: list[OSError] = []
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0,
                                                               _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            errors.append(exc)
            sock.close()
    if errors:
        raise errors[0]
    raise OSError("getaddrinfo returns an empty list")


def post_json(url: str, body: Any, headers: dict[str, str], deadline: float) -> Any:
    """POST `body` as JSON to `url`; return the decoded JSON answer or raise HttpError."""
    scheme, host, port, path, netloc = split_url(url)
    payload = lightjson.dumps(body, ensure_ascii=False).encode("utf-8")
    if scheme == "https":
        return _post_https(host, port, path, payload, headers, deadline)
    if scheme != "http" or not host:
        raise HttpError(f"unsupported URL {url!r}")
    port = port or 80
    host_header = netloc.rsplit("@", 1)[-1]
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
        s = _connect(host, port, _remaining(deadline))
        try:
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
        finally:
            s.close()
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
        return lightjson.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HttpError(f"answer is not JSON: {exc}") from exc


def _post_https(host: str | None, port: int | None, path: str, payload: bytes,
                headers: dict[str, str], deadline: float) -> Any:
    import http.client  # only https pays for http.client + ssl
    import ssl

    conn = http.client.HTTPSConnection(
        host, port or 443, timeout=_remaining(deadline),
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
