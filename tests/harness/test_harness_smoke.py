"""Prove, in the real binaries, that hooks/extensions/MCP tools reach the model.

Stand-in hooks are a tiny Python script written by each test: it logs its stdin (and a few env
vars) to a JSONL file and prints the hook output the test chose for that event. Every output is
validated against Codex's own JSON Schemas first (Claude Code accepts the same shapes).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .fake_model import FakeModel, Rule, Text, ToolCall, tool_names
from .npm import Harnesses
from .runners import (
    add_claude_mcp_server,
    add_codex_mcp_server,
    add_command_hook,
    claude_settings_path,
    codex_hooks_inventory,
    codex_hooks_path,
    pi_extensions_dir,
    run_claude,
    run_codex,
    run_pi,
    trust_codex_hooks,
)

pytestmark = pytest.mark.harness

SHARED_DIR = Path(
    os.environ.get("FACTBANK_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared"
)
SCHEMA_DIR = SHARED_DIR / "hook-schemas" / "codex"
KEBAB = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "user-prompt-submit",
    "Stop": "stop",
}

HOOK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    event, log_path, outputs_path = sys.argv[1], sys.argv[2], sys.argv[3]
    data = json.loads(sys.stdin.read() or "{}")
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("CLAUDE", "CODEX")) or k in ("PATH", "HOME")}
    with open(log_path, "a") as fh:
        fh.write(json.dumps({"event": event, "input": data, "env": env}) + "\\n")
    outputs = json.load(open(outputs_path))
    key = event
    if event == "Stop" and data.get("stop_hook_active"):
        key = "Stop:active"
    out = outputs.get(key)
    if out is not None:
        sys.stdout.write(json.dumps(out))
    """
)


def codex_schema(event: str, kind: str) -> dict[str, Any]:
    path = SCHEMA_DIR / f"{KEBAB[event]}.command.{kind}.schema.json"
    if not path.exists():
        pytest.skip(f"Codex hook schema missing: {path}")
    return json.loads(path.read_text())


def validate_output(event: str, output: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(codex_schema(event, "output")).validate(output)


class StandInHooks:
    """Writes the stand-in hook script and its per-event outputs; reads back what it logged."""

    def __init__(self, root: Path, outputs: dict[str, dict[str, Any] | None]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.script = root / "hook.py"
        self.script.write_text(HOOK_SCRIPT)
        self.log = root / "hook-log.jsonl"
        self.outputs_file = root / "outputs.json"
        for key, out in outputs.items():
            if out is not None:
                validate_output(key.split(":")[0], out)
        self.outputs_file.write_text(json.dumps(outputs))

    def command(self, event: str) -> str:
        return " ".join(
            shlex.quote(str(a))
            for a in (sys.executable, self.script, event, self.log, self.outputs_file)
        )

    def register(self, hooks_file: Path, events: list[str]) -> None:
        for event in events:
            add_command_hook(hooks_file, event, self.command(event))

    def calls(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [r for r in rows if event is None or r["event"] == event]


def context_outputs(tag: str) -> dict[str, dict[str, Any] | None]:
    return {
        "SessionStart": {
            "hookSpecificOutput": {
                "hookEventName": "SessionStart",
                "additionalContext": f"FB-SESSION-{tag}-7f3a",
            }
        },
        "UserPromptSubmit": {
            "hookSpecificOutput": {
                "hookEventName": "UserPromptSubmit",
                "additionalContext": f"FB-PROMPT-{tag}-91c2",
            }
        },
    }


def stop_outputs(tag: str) -> dict[str, dict[str, Any] | None]:
    return {
        "Stop": {"decision": "block", "reason": f"FB-STOP-{tag}-5d0e: save any verified fact"},
        "Stop:active": None,  # second Stop (stop_hook_active=true): print nothing, let it end
    }


def assert_ok(result: Any) -> None:
    assert result.returncode == 0, result.describe()


# -- (a) Claude Code: SessionStart + UserPromptSubmit context ---------------------------------
def test_claude_session_and_prompt_context(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    hooks = StandInHooks(tmp_path / "hooks", context_outputs("CLAUDE"))
    hooks.register(claude_settings_path(harness_home), ["SessionStart", "UserPromptSubmit"])

    result = run_claude(harness_home, harness_cwd, "hello claude", fake_model, harnesses=harnesses)
    assert_ok(result)
    assert json.loads(result.stdout)["result"] == fake_model.default_text

    gen = fake_model.generation_requests("anthropic")
    assert gen, "Claude Code sent no Messages request"
    assert fake_model.requests_containing("FB-SESSION-CLAUDE-7f3a")
    assert fake_model.requests_containing("FB-PROMPT-CLAUDE-91c2")
    ss = hooks.calls("SessionStart")[0]["input"]
    assert ss["hook_event_name"] == "SessionStart" and ss["source"] == "startup"
    ups = hooks.calls("UserPromptSubmit")[0]["input"]
    assert ups["prompt"] == "hello claude"
    assert {"session_id", "transcript_path", "cwd"} <= set(ups)


# -- (b) Codex: SessionStart + UserPromptSubmit context ---------------------------------------
def test_codex_session_and_prompt_context(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    hooks = StandInHooks(tmp_path / "hooks", context_outputs("CODEX"))
    hooks.register(codex_hooks_path(harness_home), ["SessionStart", "UserPromptSubmit"])

    result = run_codex(harness_home, harness_cwd, "hello codex", fake_model, harnesses=harnesses)
    assert_ok(result)
    assert fake_model.default_text in result.stdout

    assert fake_model.generation_requests("responses")
    for marker in ("FB-SESSION-CODEX-7f3a", "FB-PROMPT-CODEX-91c2"):
        found = fake_model.requests_containing(marker)
        assert found, f"{marker} never reached the model\n{result.describe()}"
        # Each additionalContext arrives as its own developer message in `input`.
        body = found[0].body
        assert any(
            item.get("role") == "developer" and marker in json.dumps(item)
            for item in body["input"]
        )
    for event in ("SessionStart", "UserPromptSubmit"):
        call = hooks.calls(event)[0]["input"]
        jsonschema.Draft7Validator(codex_schema(event, "input")).validate(call)


def test_codex_skips_untrusted_hooks_silently(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    hooks = StandInHooks(tmp_path / "hooks", context_outputs("UNTRUSTED"))
    hooks.register(codex_hooks_path(harness_home), ["SessionStart", "UserPromptSubmit"])

    result = run_codex(
        harness_home, harness_cwd, "hello", fake_model, harnesses=harnesses,
        bypass_hook_trust=False,
    )
    assert_ok(result)
    assert fake_model.generation_requests("responses")
    assert hooks.calls() == []
    assert not fake_model.requests_containing("FB-SESSION-UNTRUSTED")


def test_codex_runs_hooks_once_trusted_like_its_hooks_screen(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    hooks = StandInHooks(tmp_path / "hooks", context_outputs("TRUSTED"))
    hooks.register(codex_hooks_path(harness_home), ["SessionStart", "UserPromptSubmit"])

    inventory = codex_hooks_inventory(harness_home, harness_cwd, fake_model, harnesses=harnesses)
    assert [h["trustStatus"] for h in inventory] == ["untrusted", "untrusted"]
    assert all(h["currentHash"].startswith("sha256:") for h in inventory)
    trust_codex_hooks(harness_home, inventory)
    again = codex_hooks_inventory(harness_home, harness_cwd, fake_model, harnesses=harnesses)
    assert [h["trustStatus"] for h in again] == ["trusted", "trusted"]

    result = run_codex(
        harness_home, harness_cwd, "hello", fake_model, harnesses=harnesses,
        bypass_hook_trust=False,
    )
    assert_ok(result)
    assert fake_model.requests_containing("FB-SESSION-TRUSTED-7f3a")
    assert fake_model.requests_containing("FB-PROMPT-TRUSTED-91c2")

    # Changing a hook's command changes its hash: it is no longer trusted.
    hooks_file = codex_hooks_path(harness_home)
    data = json.loads(hooks_file.read_text())
    data["hooks"]["SessionStart"][0]["hooks"][0]["command"] += " --changed"
    hooks_file.write_text(json.dumps(data))
    changed = codex_hooks_inventory(harness_home, harness_cwd, fake_model, harnesses=harnesses)
    status = {h["eventName"]: h["trustStatus"] for h in changed}
    assert status["userPromptSubmit"] == "trusted"
    assert status["sessionStart"] != "trusted"


# -- (c) Pi: before_agent_start injection + registerTool --------------------------------------
PI_EXTENSION = textwrap.dedent(
    """
    import * as fs from "node:fs";

    const LOG = process.env.FB_PI_LOG ?? "";
    const log = (row: unknown) => { if (LOG) fs.appendFileSync(LOG, JSON.stringify(row) + "\\n"); };

    export default function (pi: any) {
      pi.on("session_start", async (event: any, ctx: any) => {
        log({ event: "session_start", reason: event.reason, cwd: ctx?.cwd });
      });
      pi.on("before_agent_start", async (event: any) => {
        log({ event: "before_agent_start", prompt: event.prompt });
        return {
          message: { customType: "factbank", content: "FB-PI-MESSAGE-3b8d", display: false },
          systemPrompt: event.systemPrompt + "\\n\\nFB-PI-SYSTEM-44e1",
        };
      });
      pi.on("agent_end", async (event: any) => {
        log({ event: "agent_end", keys: Object.keys(event) });
      });
      pi.registerTool({
        name: "factbank_recall",
        label: "factbank recall",
        description: "Recall verified facts (stand-in).",
        parameters: {
          type: "object",
          properties: { query: { type: "string" } },
          required: ["query"],
        },
        async execute(_id: string, params: any) {
          log({ event: "tool", params });
          return {
            content: [{ type: "text", text: "FB-PI-TOOL-RESULT-0c6f " + params.query }],
            details: {},
          };
        },
      });
    }
    """
)


def test_pi_extension_injects_and_registers_tool(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    ext_dir = pi_extensions_dir(harness_home)
    ext_dir.mkdir(parents=True)
    (ext_dir / "factbank-standin.ts").write_text(PI_EXTENSION)
    log = tmp_path / "pi-log.jsonl"
    fake_model.script(ToolCall("factbank_recall", {"query": "package manager"}), Text("done"))

    result = run_pi(
        harness_home, harness_cwd, "hello pi", fake_model, harnesses=harnesses,
        extra_env={"FB_PI_LOG": str(log)},
    )
    assert_ok(result)
    assert "done" in result.stdout

    gen = fake_model.generation_requests("chat")
    assert len(gen) == 2, [r.reply for r in gen]
    first = gen[0].body
    assert "factbank_recall" in tool_names(first)
    assert fake_model.requests_containing("FB-PI-MESSAGE-3b8d")
    assert fake_model.requests_containing("FB-PI-SYSTEM-44e1")
    # The returned message is an extra user-role message; the system prompt is messages[0].
    assert any(
        m["role"] == "user" and "FB-PI-MESSAGE-3b8d" in json.dumps(m) for m in first["messages"]
    )
    assert "FB-PI-SYSTEM-44e1" in json.dumps(first["messages"][0])
    # The tool ran and its result reached the next request as a tool message.
    assert any(
        m["role"] == "tool" and "FB-PI-TOOL-RESULT-0c6f package manager" in json.dumps(m)
        for m in gen[1].body["messages"]
    )
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events[:2] == ["session_start", "before_agent_start"]
    assert "tool" in events and events[-1] == "agent_end"


# -- (d) Codex calls a stdio MCP server's tool ------------------------------------------------
MCP_SERVER = textwrap.dedent(
    """
    import json, os, sys
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("factbank-standin")

    @app.tool()
    def save_fact(content: str, source: str) -> str:
        \"\"\"Save a verified fact (stand-in).\"\"\"
        with open(os.environ["FB_MCP_LOG"], "a") as fh:
            fh.write(json.dumps({"content": content, "source": source}) + "\\n")
        return "FB-MCP-SAVED-a71b id=42"

    app.run("stdio")
    """
)


def test_codex_calls_stdio_mcp_tool(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    server = tmp_path / "mcp_server.py"
    server.write_text(MCP_SERVER)
    log = tmp_path / "mcp-log.jsonl"
    add_codex_mcp_server(
        harness_home,
        "facts",
        sys.executable,
        [str(server)],
        env={"FB_MCP_LOG": str(log)},
        # The mcp SDK needs ~2 s to import here; without `required` codex exec sends its first
        # request before the server is up and the tool is missing from that turn.
        required=True,
        # codex exec runs with approval policy "never": without this the call is refused.
        default_tools_approval_mode="approve",
    )
    args = {"content": "uses pnpm", "source": "user said"}
    fake_model.script(ToolCall("mcp__facts__save_fact", args), Text("saved it"))

    result = run_codex(harness_home, harness_cwd, "remember: pnpm", fake_model,
                       harnesses=harnesses)
    assert_ok(result)

    gen = fake_model.generation_requests("responses")
    assert len(gen) == 2, result.describe()
    assert "mcp__facts__save_fact" in tool_names(gen[0].body)
    namespaces = [t for t in gen[0].body["tools"] if t.get("type") == "namespace"]
    assert any(t["name"] == "mcp__facts" for t in namespaces)
    assert [json.loads(line) for line in log.read_text().splitlines()] == [args]
    outputs = [i for i in gen[1].body["input"] if i.get("type") == "function_call_output"]
    assert outputs and "FB-MCP-SAVED-a71b id=42" in json.dumps(outputs[-1])


def test_claude_calls_stdio_mcp_tool(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    server = tmp_path / "mcp_server.py"
    server.write_text(MCP_SERVER)
    log = tmp_path / "mcp-log.jsonl"
    tool = "mcp__facts__save_fact"
    add_claude_mcp_server(
        harness_home, "facts", sys.executable, [str(server)],
        env={"FB_MCP_LOG": str(log)}, allow_tools=[tool],
    )
    args = {"content": "uses pnpm", "source": "user said"}
    # While the server is still connecting Claude Code offers `WaitForMcpServers` instead of
    # the server's tools: call it until the tool shows up, then call the tool, then answer.
    fake_model.script(
        Rule(
            ToolCall("WaitForMcpServers", {}),
            api="anthropic",
            when=lambda b: tool not in tool_names(b) and "WaitForMcpServers" in tool_names(b),
            times=5,
        ),
        ToolCall(tool, args),
        Text("saved it"),
    )

    result = run_claude(harness_home, harness_cwd, "remember: pnpm", fake_model,
                        harnesses=harnesses)
    assert_ok(result)
    assert json.loads(result.stdout)["result"] == "saved it", result.describe()
    assert [json.loads(line) for line in log.read_text().splitlines()] == [args]
    last = fake_model.generation_requests("anthropic")[-1].body
    results = [
        block
        for m in last["messages"] if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"] if block.get("type") == "tool_result"
    ]
    assert results and "FB-MCP-SAVED-a71b id=42" in json.dumps(results[-1])


# -- (e) Stop hooks: what they receive, what they may answer ----------------------------------
def test_claude_stop_hook_block_then_active(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    hooks = StandInHooks(tmp_path / "hooks", stop_outputs("CLAUDE"))
    hooks.register(claude_settings_path(harness_home), ["Stop"])

    result = run_claude(harness_home, harness_cwd, "hello", fake_model, harnesses=harnesses)
    assert_ok(result)

    stops = [c["input"] for c in hooks.calls("Stop")]
    assert [s["stop_hook_active"] for s in stops] == [False, True]
    assert stops[0]["last_assistant_message"] == fake_model.default_text
    gen = fake_model.generation_requests("anthropic")
    assert len(gen) == 2
    assert gen[0] not in fake_model.requests_containing("FB-STOP-CLAUDE-5d0e")
    assert gen[1] in fake_model.requests_containing("FB-STOP-CLAUDE-5d0e")


def test_codex_stop_hook_block_then_active(
    harnesses: Harnesses, fake_model: FakeModel, harness_home: Path, harness_cwd: Path,
    tmp_path: Path,
) -> None:
    hooks = StandInHooks(tmp_path / "hooks", stop_outputs("CODEX"))
    hooks.register(codex_hooks_path(harness_home), ["Stop"])

    result = run_codex(harness_home, harness_cwd, "hello", fake_model, harnesses=harnesses)
    assert_ok(result)

    stops = [c["input"] for c in hooks.calls("Stop")]
    for stop in stops:
        jsonschema.Draft7Validator(codex_schema("Stop", "input")).validate(stop)
    assert [s["stop_hook_active"] for s in stops] == [False, True]
    assert stops[0]["last_assistant_message"] == fake_model.default_text
    gen = fake_model.generation_requests("responses")
    assert len(gen) == 2
    assert gen[1] in fake_model.requests_containing("FB-STOP-CODEX-5d0e")
    assert gen[0] not in fake_model.requests_containing("FB-STOP-CODEX-5d0e")
