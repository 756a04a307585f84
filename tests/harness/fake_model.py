"""A scripted fake model server for the real agent harnesses, on loopback only.

One threaded stdlib ``http.server`` on ``127.0.0.1`` (ephemeral port) speaks the three wire
protocols the harnesses use:

* Anthropic Messages (Claude Code): ``POST /v1/messages`` (SSE or JSON) and
  ``POST /v1/messages/count_tokens``;
* OpenAI Responses (Codex): ``POST /v1/responses`` (SSE);
* OpenAI Chat Completions (Pi with ``api: openai-completions``): ``POST /v1/chat/completions``
  (SSE ending in ``data: [DONE]``, or JSON);
* Gemini API (Gemini CLI): ``POST /v1beta/models/M:streamGenerateContent?alt=sse`` (SSE, one
  whole ``GenerateContentResponse`` per event), ``:generateContent`` (JSON; a request for JSON
  output, e.g. Gemini CLI's next-speaker check, gets ``{"next_speaker": "user"}``),
  ``:countTokens``;
* ``GET /v1/models``.

Every request is logged (thread-safe). Replies follow a script of :class:`Rule` objects: the
first rule whose API and predicate match a generation request answers it (a rule answers at most
``times`` requests); anything else gets :attr:`FakeModel.default_text`.

Usage::

    with FakeModel() as fake:
        fake.script(ToolCall("mcp__facts__save", {"text": "x"}), Text("done"))
        ...  # run a harness against fake.url / fake.base_url
        assert fake.requests_containing("MARKER")
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

Api = Literal["anthropic", "responses", "chat", "gemini"]

MODEL_ID = "stub-model"


@dataclass(frozen=True)
class Text:
    """Answer with plain assistant text."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """Answer with one call of tool ``name`` with arguments ``args``.

    ``name`` is the name exactly as the harness lists it in the request's ``tools`` (see
    :func:`tool_names`). For Codex MCP tools that is ``mcp__<server>__<tool>``.
    ``text`` is optional assistant text sent before the call.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None
    text: str | None = None


Reply = Text | ToolCall


@dataclass
class Rule:
    """One scripted answer.

    ``api``: only requests of that wire protocol (``None``: any). ``when``: extra predicate on
    the parsed request body. A :class:`ToolCall` rule by default only matches requests that offer
    a tool of that name (so side requests, e.g. Claude Code's title/topic calls without tools,
    don't consume it). ``times``: how many requests it answers (``None``: unlimited).
    """

    reply: Reply
    api: Api | None = None
    when: Callable[[dict[str, Any]], bool] | None = None
    times: int | None = 1
    used: int = 0

    def matches(self, api: Api, body: dict[str, Any]) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.api is not None and self.api != api:
            return False
        if isinstance(self.reply, ToolCall) and self.when is None:
            if self.reply.name not in tool_names(body):
                return False
        return self.when is None or bool(self.when(body))


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    raw: str
    body: Any  # parsed JSON, or None
    api: Api | None
    reply: Reply | None
    at: float

    def dumps(self) -> str:
        """The whole request as searchable text (raw body plus its JSON re-encoding)."""
        encoded = json.dumps(self.body, ensure_ascii=False) if self.body is not None else ""
        return f"{self.path}?{self.query}\n{self.raw}\n{encoded}"


def tool_names(body: Any) -> list[str]:
    """The names of the tools a generation request offers, for all three wire protocols.

    Handles Anthropic ``{"name"}``, Chat Completions ``{"function": {"name"}}``, Responses
    ``{"type": "function", "name"}`` and Responses namespaces (``{"type": "namespace",
    "name": ns, "tools": [...]}``), which are reported both as ``ns`` + tool name and as
    the bare tool name.
    """
    names: list[str] = []
    if not isinstance(body, dict):
        return names
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        for decl in tool.get("functionDeclarations") or []:  # Gemini
            if isinstance(decl, dict) and "name" in decl:
                names.append(str(decl["name"]))
        if isinstance(tool.get("function"), dict) and "name" in tool["function"]:
            names.append(str(tool["function"]["name"]))
        elif tool.get("type") == "namespace":
            ns = str(tool.get("name", ""))
            for sub in tool.get("tools") or []:
                if isinstance(sub, dict) and "name" in sub:
                    names.append(_join_namespace(ns, str(sub["name"])))
                    names.append(str(sub["name"]))
        elif "name" in tool:
            names.append(str(tool["name"]))
    return names


def _join_namespace(ns: str, name: str) -> str:
    """Codex lists MCP tools as namespace ``mcp__server`` + tool ``name``; their canonical name
    is ``mcp__server__name``."""
    return ns + name if ns.endswith("__") else f"{ns}__{name}"


def _responses_tool_namespace(body: Any, name: str) -> tuple[str | None, str]:
    """For a Responses request that groups tools in namespaces, split ``name`` into
    (namespace, tool) if it names a namespaced tool; else (None, name)."""
    if isinstance(body, dict):
        for tool in body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("type") == "namespace":
                ns = str(tool.get("name", ""))
                for sub in tool.get("tools") or []:
                    if not isinstance(sub, dict):
                        continue
                    sub_name = str(sub.get("name", ""))
                    if name in (_join_namespace(ns, sub_name), sub_name):
                        return ns, sub_name
    return None, name


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Harnesses drop keep-alive connections abruptly when they exit; that's not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeModel:
    """The server. Use as a context manager, or call :meth:`start` / :meth:`stop`."""

    def __init__(self, default_text: str = "OK from the fake model.") -> None:
        self.default_text = default_text
        self._lock = threading.Lock()
        self._requests: list[LoggedRequest] = []
        self._rules: list[Rule] = []
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeModel:
        handler = _make_handler(self)
        server = _QuietServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="fake-model", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (Claude Code's ``ANTHROPIC_BASE_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (Codex's and Pi's provider ``base_url``)."""
        return self.url + "/v1"

    # -- script ----------------------------------------------------------------------------
    def script(self, *replies: Reply | Rule, api: Api | None = None) -> None:
        """Append rules. Bare replies become one-shot rules (restricted to ``api`` if given)."""
        with self._lock:
            for item in replies:
                self._rules.append(item if isinstance(item, Rule) else Rule(item, api=api))

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self._requests.clear()

    def _choose(self, api: Api, body: dict[str, Any]) -> Reply:
        with self._lock:
            for rule in self._rules:
                if rule.matches(api, body):
                    rule.used += 1
                    return rule.reply
        return Text(self.default_text)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    # -- log -------------------------------------------------------------------------------
    def _log(self, req: LoggedRequest) -> None:
        with self._lock:
            self._requests.append(req)

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._requests)

    def generation_requests(self, api: Api | None = None) -> list[LoggedRequest]:
        """Logged requests that asked the model for an answer (not count_tokens/models)."""
        return [r for r in self.requests if r.api is not None and (api is None or r.api == api)]

    def requests_containing(self, text: str) -> list[LoggedRequest]:
        """Every logged request whose path, raw body or JSON contains ``text``."""
        return [r for r in self.requests if text in r.dumps()]

    def wait_for(self, text: str, timeout: float = 10.0) -> list[LoggedRequest]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.requests_containing(text)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


# -- wire formats ------------------------------------------------------------------------------
def _anthropic(fake: FakeModel, body: dict[str, Any], reply: Reply) -> tuple[bytes, str]:
    n = fake._next_id()
    model = body.get("model", MODEL_ID)
    blocks: list[dict[str, Any]] = []
    if isinstance(reply, Text):
        blocks.append({"type": "text", "text": reply.text})
        stop_reason = "end_turn"
    else:
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        blocks.append(
            {
                "type": "tool_use",
                "id": reply.call_id or f"toolu_fake{n:04d}",
                "name": reply.name,
                "input": reply.args,
            }
        )
        stop_reason = "tool_use"
    usage = {"input_tokens": 10, "output_tokens": 5}
    if not body.get("stream"):
        message = {
            "id": f"msg_fake{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        return json.dumps(message).encode(), "application/json"
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_fake{n:04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": start},
            )
        )
        out.append(
            _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out), "text/event-stream"


def _responses(fake: FakeModel, body: dict[str, Any], reply: Reply) -> tuple[bytes, str]:
    n = fake._next_id()
    rid = f"resp_fake{n:04d}"
    model = body.get("model", MODEL_ID)
    seq = itertools.count()
    events: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        events.append(_sse(kind, {"type": kind, "sequence_number": next(seq), **data}))

    base = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "output": [],
    }
    emit("response.created", response={**base, "status": "in_progress"})
    emit("response.in_progress", response={**base, "status": "in_progress"})
    items: list[dict[str, Any]] = []
    texts = [reply.text] if isinstance(reply, Text) else ([reply.text] if reply.text else [])
    for text in texts:
        idx = len(items)
        item_id = f"msg_fake{n:04d}_{idx}"
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        emit("response.output_item.added", output_index=idx, item=item)
        emit(
            "response.content_part.added",
            item_id=item_id,
            output_index=idx,
            content_index=0,
            part=part,
        )
        emit(
            "response.output_text.delta",
            item_id=item_id,
            output_index=idx,
            content_index=0,
            delta=text,
        )
        emit(
            "response.output_text.done",
            item_id=item_id,
            output_index=idx,
            content_index=0,
            text=text,
        )
        done_part = {**part, "text": text}
        emit(
            "response.content_part.done",
            item_id=item_id,
            output_index=idx,
            content_index=0,
            part=done_part,
        )
        done = {**item, "status": "completed", "content": [done_part]}
        emit("response.output_item.done", output_index=idx, item=done)
        items.append(done)
    if isinstance(reply, ToolCall):
        idx = len(items)
        namespace, name = _responses_tool_namespace(body, reply.name)
        args = json.dumps(reply.args)
        item = {
            "id": f"fc_fake{n:04d}",
            "type": "function_call",
            "status": "in_progress",
            "call_id": reply.call_id or f"call_fake{n:04d}",
            "name": name,
            "arguments": "",
        }
        if namespace is not None:
            item["namespace"] = namespace
        emit("response.output_item.added", output_index=idx, item=item)
        emit(
            "response.function_call_arguments.delta",
            item_id=item["id"],
            output_index=idx,
            delta=args,
        )
        emit(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=idx,
            arguments=args,
        )
        done = {**item, "status": "completed", "arguments": args}
        emit("response.output_item.done", output_index=idx, item=done)
        items.append(done)
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    emit("response.completed", response={**base, "status": "completed", "output": items,
                                          "usage": usage})
    return b"".join(events), "text/event-stream"


def _chat(fake: FakeModel, body: dict[str, Any], reply: Reply) -> tuple[bytes, str]:
    n = fake._next_id()
    cid = f"chatcmpl-fake{n:04d}"
    model = body.get("model", MODEL_ID)
    created = int(time.time())
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    text = reply.text
    tool_calls: list[dict[str, Any]] = []
    if isinstance(reply, ToolCall):
        tool_calls.append(
            {
                "id": reply.call_id or f"call_fake{n:04d}",
                "type": "function",
                "function": {"name": reply.name, "arguments": json.dumps(reply.args)},
            }
        )
    finish = "tool_calls" if tool_calls else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            message["tool_calls"] = tool_calls
        out = {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return json.dumps(out).encode(), "application/json"

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return _sse(
            None,
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            },
        )

    chunks = [chunk({"role": "assistant", "content": ""})]
    if text:
        chunks.append(chunk({"content": text}))
    for i, call in enumerate(tool_calls):
        chunks.append(chunk({"tool_calls": [{"index": i, **call}]}))
    chunks.append(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append(
            _sse(
                None,
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                },
            )
        )
    chunks.append(_sse(None, "[DONE]"))
    return b"".join(chunks), "text/event-stream"


def _gemini(fake: FakeModel, body: dict[str, Any], reply: Reply,
            method: str = "streamGenerateContent") -> tuple[bytes, str]:
    n = fake._next_id()
    if isinstance(reply, ToolCall):
        parts: list[dict[str, Any]] = [{"functionCall": {"name": reply.name,
                                                         "args": reply.args}}]
        if reply.text:
            parts.insert(0, {"text": reply.text})
    else:
        parts = [{"text": reply.text}]
    config = body.get("generationConfig") or {}
    if method == "generateContent" and (config.get("responseMimeType") == "application/json"
                                        or config.get("responseJsonSchema")
                                        or config.get("responseSchema")):
        parts = [{"text": json.dumps({"reasoning": "fake", "next_speaker": "user"})}]
    out = {"candidates": [{"content": {"role": "model", "parts": parts},
                           "finishReason": "STOP", "index": 0}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                             "totalTokenCount": 15},
           "modelVersion": MODEL_ID, "responseId": f"fake{n:04d}"}
    if method == "streamGenerateContent":
        return _sse(None, out), "text/event-stream"
    return json.dumps(out).encode(), "application/json"


_GEMINI_PATH = re.compile(r"/models/[^/:]+:(streamGenerateContent|generateContent|countTokens)$")

_ROUTES: dict[str, tuple[Api, Callable[[FakeModel, dict[str, Any], Reply], tuple[bytes, str]]]] = {
    "/v1/messages": ("anthropic", _anthropic),
    "/v1/responses": ("responses", _responses),
    "/v1/chat/completions": ("chat", _chat),
}


def _make_handler(fake: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeModel/1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, status: int, payload: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            if ctype == "text/event-stream":
                self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            path = parts.path.rstrip("/") or "/"
            length = int(self.headers.get("Content-Length") or 0)
            raw_bytes = self.rfile.read(length) if length else b""
            raw = raw_bytes.decode("utf-8", "replace")
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            api: Api | None = None
            reply: Reply | None = None
            status, payload, ctype = 404, b'{"error": "not found"}', "application/json"
            if self.command == "GET" and path == "/v1/models":
                models = [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "fake",
                           "type": "model", "display_name": "Stub model"}]
                payload = json.dumps({"object": "list", "data": models, "has_more": False,
                                      "first_id": MODEL_ID, "last_id": MODEL_ID}).encode()
                status = 200
            elif self.command == "POST" and path == "/v1/messages/count_tokens":
                tokens = max(1, len(raw) // 4)
                status, payload = 200, json.dumps({"input_tokens": tokens}).encode()
            elif self.command == "POST" and (m := _GEMINI_PATH.search(path)):
                req_body = body if isinstance(body, dict) else {}
                if m.group(1) == "countTokens":
                    status, payload = 200, b'{"totalTokens": 10}'
                else:
                    api = "gemini"
                    reply = fake._choose(api, req_body)
                    payload, ctype = _gemini(fake, req_body, reply, m.group(1))
                    status = 200
            elif self.command == "POST" and path in _ROUTES:
                api, render = _ROUTES[path]
                req_body = body if isinstance(body, dict) else {}
                reply = fake._choose(api, req_body)
                payload, ctype = render(fake, req_body, reply)
                status = 200
            fake._log(
                LoggedRequest(
                    method=self.command,
                    path=path,
                    query=parts.query,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw=raw,
                    body=body,
                    api=api,
                    reply=reply,
                    at=time.time(),
                )
            )
            self._send(status, payload, ctype)

        do_GET = _handle
        do_POST = _handle
        do_HEAD = _handle
        do_PUT = _handle
        do_DELETE = _handle

    return Handler
