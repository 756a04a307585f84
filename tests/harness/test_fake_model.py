"""Fast checks of the fake model server itself (no npm, no harness)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from .fake_model import FakeModel, Rule, Text, ToolCall, tool_names


def post(fake: FakeModel, path: str, body: dict[str, Any]) -> tuple[str, str]:
    req = urllib.request.Request(
        fake.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def sse_data(text: str) -> list[Any]:
    out = []
    for line in text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def test_anthropic_tool_use_then_text() -> None:
    with FakeModel() as fake:
        fake.script(ToolCall("save", {"a": 1}), Text("done"))
        body = {"model": "m", "stream": True, "tools": [{"name": "save"}], "messages": []}
        ctype, text = post(fake, "/v1/messages?beta=true", body)
        assert ctype == "text/event-stream"
        events = sse_data(text)
        kinds = [e["type"] for e in events]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
        start = next(e for e in events if e["type"] == "content_block_start")
        assert start["content_block"]["type"] == "tool_use"
        assert start["content_block"]["name"] == "save"
        delta = next(e for e in events if e["type"] == "content_block_delta")
        assert json.loads(delta["delta"]["partial_json"]) == {"a": 1}
        stop = next(e for e in events if e["type"] == "message_delta")
        assert stop["delta"]["stop_reason"] == "tool_use"
        _, text = post(fake, "/v1/messages", {**body, "marker": "XYZ"})
        assert any(
            e.get("delta", {}).get("text") == "done" for e in sse_data(text)
        )
        _, count = post(fake, "/v1/messages/count_tokens", {"messages": []})
        assert json.loads(count)["input_tokens"] >= 1
        assert len(fake.requests_containing("XYZ")) == 1
        assert len(fake.generation_requests("anthropic")) == 2


def test_tool_rule_waits_for_a_request_that_offers_the_tool() -> None:
    with FakeModel() as fake:
        fake.script(ToolCall("save", {}))
        _, text = post(fake, "/v1/messages", {"stream": True, "messages": []})  # no tools
        assert "tool_use" not in text
        _, text = post(fake, "/v1/messages", {"stream": True, "tools": [{"name": "save"}]})
        assert "tool_use" in text


def test_responses_namespaced_mcp_tool_call() -> None:
    tools = [
        {"type": "function", "name": "exec_command"},
        {"type": "namespace", "name": "mcp__facts", "tools": [{"type": "function",
                                                               "name": "save_fact"}]},
    ]
    assert "mcp__facts__save_fact" in tool_names({"tools": tools})
    with FakeModel() as fake:
        fake.script(ToolCall("mcp__facts__save_fact", {"x": "y"}))
        _, text = post(fake, "/v1/responses", {"model": "m", "stream": True, "tools": tools})
        events = sse_data(text)
        assert events[0]["type"] == "response.created"
        assert events[-1]["type"] == "response.completed"
        done = [e for e in events if e["type"] == "response.output_item.done"]
        item = done[-1]["item"]
        assert item["type"] == "function_call"
        assert (item["namespace"], item["name"]) == ("mcp__facts", "save_fact")
        assert json.loads(item["arguments"]) == {"x": "y"}
        assert events[-1]["response"]["output"][-1] == item


def test_chat_completions_tool_call_and_done() -> None:
    with FakeModel() as fake:
        fake.script(Rule(ToolCall("recall", {"q": "z"}), api="chat"))
        body = {"stream": True, "stream_options": {"include_usage": True},
                "tools": [{"type": "function", "function": {"name": "recall"}}]}
        _, text = post(fake, "/v1/chat/completions", body)
        chunks = sse_data(text)
        assert chunks[-1] == "[DONE]"
        deltas = [c["choices"][0]["delta"] for c in chunks[:-1] if c["choices"]]
        calls = [d for d in deltas if "tool_calls" in d]
        assert calls[0]["tool_calls"][0]["function"]["name"] == "recall"
        finishes = [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"]]
        assert finishes[-1] == "tool_calls"
        assert "usage" in chunks[-2]
        _, text = post(fake, "/v1/chat/completions", body)
        assert fake.default_text in text


def test_models_list() -> None:
    with FakeModel() as fake, urllib.request.urlopen(fake.url + "/v1/models", timeout=5) as r:
        assert json.loads(r.read())["data"][0]["id"] == "stub-model"
