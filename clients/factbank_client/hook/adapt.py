"""The hooks of Gemini CLI, Qwen Code and Copilot CLI, spoken in Claude Code's terms.

The installer registers `hooks.py <event> <harness>` in these harnesses (the second argument
is what tells them apart: all three set CLAUDE_PROJECT_DIR, so the environment cannot).
`normalize` turns a harness's payload into the Claude-shaped one the event handlers
(hookmain, hookrecord) already understand, and `render` turns their output back into what
that harness accepts. The payloads below were captured from the real binaries
(tests/fixtures/harness-payloads/*.jsonl; Gemini CLI 0.61.0, Qwen Code 0.15.10, Copilot CLI
1.0.102):

* Gemini CLI: Claude-like snake_case payloads under its own event names (BeforeAgent = the
  prompt, AfterAgent = the stop, AfterTool); tools `write_file`, `replace`,
  `run_shell_command`; output `hookSpecificOutput` with its own `hookEventName`. In `-p`
  mode the session block arrives inside BeforeAgent's `prompt` (HOOK_CONTEXT): cut off.
* Qwen Code: Claude's event names and output; tools `write_file`, `edit`,
  `run_shell_command` (`Exit Code: N` in the result). Two traps seen: its prompt hook fires
  again with `prompt: ""` after every tool round (not a prompt: nothing is injected, nothing
  counted), and its Stop arrives with `stop_hook_active: true` on an ordinary first stop, so
  the flag means nothing there (the reminder's own counter keeps it from looping), and it
  fires no SessionStart in `-p` mode (the first prompt of a session does its work).
* Copilot CLI: camelCase (`sessionId`, `toolName`, `toolArgs`, `toolResult`,
  `transcriptPath`); tools `create`, `edit`, `bash` (`exit code N` in the result); output
  `{"additionalContext": ...}` for context, `{"decision": "block", "reason"}` to keep the
  agent going at `agentStop`.
* OpenCode: no command hooks; factbank's plugin (assets/opencode/factbank.ts) calls this hook
  with Claude-shaped payloads made from its `chat.message`, `tool.execute.*` and
  `session.idle`; tools `write`, `edit` (`filePath`), `bash` (the plugin passes its exit code).

Standard library only, imported from bytecode by the hook process (the budget is the
interpreter's start plus a few ms). So `re`, `json` and `hashlib` are imported only where a
path needs them: the prompt, session-start and stop hooks of these harnesses load none of
them (10.4 ms of CPU for `json` and the `re` it brings, ~10 ms for `hashlib`, in a fresh
`python -I -S` on the 2-core box; the bare interpreter 11.1 ms). The two patterns run only
in the recording child (EXIT_CODE) or on a Gemini prompt that holds a `<hook_context>`.
"""

from factbank_client import lightjson

HARNESSES = ("gemini", "qwen", "copilot", "opencode")

# Our event (hookmain/hookentry's name) -> the harness's own, where it differs.
GEMINI_EVENTS = {"UserPromptSubmit": "BeforeAgent", "Stop": "AfterAgent",
                 "PostToolUse": "AfterTool", "PostToolUseFailure": "AfterTool"}

# The harness's file and shell tools -> Claude Code's, with the argument naming the file.
FILE_TOOLS = {
    "gemini": {"write_file": ("Write", "file_path"), "replace": ("Edit", "file_path")},
    "qwen": {"write_file": ("Write", "file_path"), "edit": ("Edit", "file_path")},
    "copilot": {"create": ("Write", "path"), "edit": ("Edit", "path")},
    "opencode": {"write": ("Write", "filePath"), "edit": ("Edit", "filePath")},
}
SHELL_TOOLS = {"gemini": "run_shell_command", "qwen": "run_shell_command", "copilot": "bash",
               "opencode": "bash"}
EXIT_CODE = r"(?i)exit code:?\s*(-?\d+)"
# Gemini CLI in `-p` mode prepends the SessionStart context to the prompt itself, so its
# BeforeAgent hook gets `<hook_context>[factbank] ...</hook_context>\n\n<the prompt>`: asked
# with that, the recall matched the session block, not the question (seen: no prompt fact).
HOOK_CONTEXT = r"(?s)^\s*(?:<hook_context>.*?</hook_context>\s*)+"


def harness_of(argv: list) -> str | None:
    """The harness named by the hook's second argument, or None (Claude Code, Codex)."""
    name = argv[1].strip().lower() if len(argv) > 1 else ""
    return name if name in HARNESSES else None


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("llmContent", "textResultForLlm", "output", "content"):
            if key in value:
                return _text(value[key])
        return ""
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    return ""


def _call_id(harness: str, data: dict, name: str, args: object) -> str:
    """A stable id for a tool call the harness gives none for (Gemini, Copilot): the timeline
    dedupes events by it, so two calls must not share one."""
    import hashlib
    import json  # sort_keys and default: json's own

    seed = json.dumps([harness, data.get("session_id"), data.get("timestamp"), name, args],
                      sort_keys=True, default=str)
    return f"{harness}-" + hashlib.sha1(seed.encode("utf-8")).hexdigest()[:16]


def _tool(harness: str, event: str, data: dict, name: str, args: object,
          result: object) -> tuple[str, dict]:
    """Claude's PostToolUse(Failure) fields for one of the harness's tool calls."""
    if not data.get("tool_use_id"):
        data["tool_use_id"] = _call_id(harness, data, name, args)
    args = args if isinstance(args, dict) else {}
    if name in FILE_TOOLS[harness]:
        claude_name, key = FILE_TOOLS[harness][name]
        data["tool_name"], data["tool_input"] = claude_name, {"file_path": args.get(key)}
        failed = isinstance(result, dict) and (result.get("error") or
                                               result.get("resultType") == "failure")
        return ("PostToolUseFailure" if failed else event), data
    if name == SHELL_TOOLS[harness]:
        data["tool_name"], data["tool_input"] = "Bash", {"command": args.get("command")}
        import re

        m = re.search(EXIT_CODE, _text(result))
        if m and int(m.group(1)) != 0:
            data["error"] = f"Exit code {m.group(1)}"
            return "PostToolUseFailure", data
        return "PostToolUse", data
    data["tool_name"], data["tool_input"] = name, args
    return event, data


def normalize(harness: str, event: str, data: dict) -> tuple[str, dict]:
    """(our event, the Claude-shaped payload) for one hook call of `harness`."""
    if harness == "copilot":
        out = {"session_id": data.get("sessionId"), "cwd": data.get("cwd"),
               "timestamp": data.get("timestamp"),
               "transcript_path": data.get("transcriptPath"),
               "stop_hook_active": data.get("stop_hook_active", False)}
        if "prompt" in data:
            out["prompt"] = data["prompt"]
        name, args, result = data.get("toolName"), data.get("toolArgs"), data.get("toolResult")
    else:
        out = dict(data)
        name, args, result = data.get("tool_name"), data.get("tool_input"), \
            data.get("tool_response")
        if harness == "qwen":
            out["stop_hook_active"] = False  # true on ordinary stops here (module docstring)
        if harness == "gemini" and isinstance(out.get("prompt"), str) \
                and "<hook_context>" in out["prompt"]:  # else the pattern cannot match
            import re

            out["prompt"] = re.sub(HOOK_CONTEXT, "", out["prompt"])
    out["factbank_agent"] = harness
    if event in ("PostToolUse", "PostToolUseFailure") and isinstance(name, str):
        return _tool(harness, event, out, name, args, result)
    return event, out


def render(harness: str, event: str, out: dict | None) -> dict | None:
    """hookmain's output object (Claude's shape) as `harness` accepts it."""
    if out is None:
        return None
    context = (out.get("hookSpecificOutput") or {}).get("additionalContext")
    if harness == "copilot":
        if "decision" in out:
            return {"decision": out["decision"], "reason": out.get("reason", "")}
        return {"additionalContext": context} if context else None
    if harness == "gemini" and "hookSpecificOutput" in out:
        own = GEMINI_EVENTS.get(event, event)
        return {**out, "hookSpecificOutput": {**out["hookSpecificOutput"],
                                              "hookEventName": own}}
    return out


def render_pending(harness: str, raw: bytes) -> bytes:
    """A PostToolUse output an earlier hook left (already JSON, Claude's shape) for `harness`."""
    try:
        out = lightjson.loads(raw.decode("utf-8"))
    except ValueError:
        return b""
    new = render(harness, "PostToolUse", out if isinstance(out, dict) else None)
    return lightjson.dumps(new, ensure_ascii=True).encode() if new else b""


def adapt_raw(harness: str, event: str, raw: bytes) -> tuple[str, bytes]:
    """normalize() for the recording events, which travel as raw bytes to the child."""
    data = lightjson.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        return event, raw
    event, data = normalize(harness, event, data)
    return event, lightjson.dumps(data).encode("utf-8")
