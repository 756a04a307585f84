"""The three harnesses' JSON event streams, turned into a run's log events.

Each parser was written from a stream the real binary printed (tests/fixtures/dispatch/, from
`capture.py` there: Claude Code 2.1.197 `-p --output-format stream-json --verbose`, Codex
0.171.0 `exec --json`, Pi 0.73.1 `-p --mode json`, against the fake model server), never from
documentation alone:

* Claude Code prints whole messages: an `assistant` line with `text` and `tool_use` blocks, a
  `user` line with the `tool_result` (a failed Bash is `is_error` with `Exit code N` first),
  `system`/`init` with the session id first and a `result` line last.
* Codex prints `thread.started` (the session id) and `item.started`/`item.completed` items:
  `command_execution` (command wrapped in `/bin/bash -lc '...'`, `exit_code`,
  `aggregated_output`), `file_change` (`changes[].path`, `kind`), `agent_message`, `error`.
* Pi prints `session` (its id) and, per tool, `tool_execution_start`/`_end` (a failed bash
  ends its output with `Command exited with code N`); the assistant's text comes whole in
  `message_end`. Its `message_update` lines repeat the partial message on every delta and are
  skipped.

A parser is fed one decoded JSON object at a time and returns event drafts
(`{"kind", "text", "command"?, "exit_code"?, "path"?}`); it keeps the session id, the last
message, the files edited (relative to the repository root) and whether the harness itself
reported failure. Commands are reported when they finish, with their exit code.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from factbank_client.history import relative, repo_root

OUTPUT_CHARS = 1500  # of a command's output kept in its event
Draft = dict[str, Any]

CLAUDE_EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
PI_EDIT_TOOLS = {"edit", "write"}


def _text(value: Any) -> str:
    """A tool result's content (a string, or a list of text blocks) as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(str(b.get("text", "")) for b in value
                         if isinstance(b, dict) and b.get("type") == "text")
    if isinstance(value, dict):
        return _text(value.get("content"))
    return ""


def _tail(text: str, limit: int = OUTPUT_CHARS) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _args(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Parser:
    agent = ""

    def __init__(self, cwd: str = ".") -> None:
        self.cwd = cwd
        self.root = repo_root(cwd)
        self.session_id: str | None = None
        self.summary = ""
        self.files: list[str] = []
        self.harness_error: str | None = None
        self.commands = 0
        self.failed_commands = 0

    def feed(self, obj: dict[str, Any]) -> list[Draft]:
        raise NotImplementedError

    def text_line(self, line: str) -> list[Draft]:
        """A stdout line that is not JSON (a harness that ignored the JSON flag, or a
        warning): kept as a message."""
        line = line.strip()
        return [{"kind": "message", "text": line}] if line else []

    # --- the shared shapes --------------------------------------------------------------
    def message(self, text: str) -> list[Draft]:
        text = text.strip()
        if not text:
            return []
        self.summary = text
        return [{"kind": "message", "text": self.summary}]

    def command(self, command: str, exit_code: int | None, output: str) -> Draft:
        self.commands += 1
        if exit_code not in (0, None):
            self.failed_commands += 1
        return {"kind": "command", "command": command, "exit_code": exit_code,
                "text": _tail(output)}

    def edit(self, path: str, what: str) -> Draft:
        # Relative to the repository root; outside a repository, to the run's directory.
        rel = relative(path, self.root or os.path.realpath(self.cwd), self.cwd)
        if rel not in self.files and len(self.files) < 200:
            self.files.append(rel)
        return {"kind": "edit", "path": rel, "text": f"{what} {rel}"}

    def tool(self, name: str, args: Any) -> Draft:
        text = f"{name} {_args(args)}".strip()
        base = self.root or os.path.realpath(self.cwd)
        text = text.replace(base.rstrip(os.sep) + os.sep, "")  # paths as the repo names them
        return {"kind": "tool", "text": text}

    def error(self, text: str) -> Draft:
        return {"kind": "error", "text": text.strip()}


FACT_LINE = re.compile(r"^- #\d+ ")
EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (-?\d+)", re.M)


class ClaudeParser(Parser):
    """`claude -p TASK --output-format stream-json --verbose`."""

    agent = "claude"

    def __init__(self, cwd: str = ".") -> None:
        super().__init__(cwd)
        self.pending: dict[str, tuple[str, dict]] = {}

    def feed(self, obj: dict[str, Any]) -> list[Draft]:
        kind = obj.get("type")
        if obj.get("session_id") and not self.session_id:
            self.session_id = str(obj["session_id"])
        if kind == "system":
            if obj.get("subtype") == "hook_response":
                return self._hook(obj)
            if obj.get("subtype") == "init":
                return [{"kind": "status", "text": f"session {obj.get('session_id')} "
                         f"(Claude Code {obj.get('claude_code_version', '?')}, model "
                         f"{obj.get('model', '?')}, permissions {obj.get('permissionMode')})"}]
            return []
        if kind == "assistant":
            return self._assistant(obj.get("message") or {})
        if kind == "user":
            return self._results(obj.get("message") or {})
        if kind == "result":
            return self._result(obj)
        return []

    def _hook(self, obj: dict) -> list[Draft]:
        """A hook's answer (`system`/`hook_response`): the context it added (factbank's
        SessionStart and prompt blocks: the shared context, seen loading), or its failure."""
        name = str(obj.get("hook_event") or obj.get("hook_name") or "hook")
        if obj.get("outcome") not in (None, "success"):
            why = _tail(str(obj.get("stderr") or ""), 300)
            return [self.error(f"{name} hook {obj.get('outcome')} (exit "
                               f"{obj.get('exit_code')}): {why}")]
        try:
            out = json.loads(str(obj.get("output") or "").strip() or "{}")
        except ValueError:
            return []
        context = ((out.get("hookSpecificOutput") or {}).get("additionalContext")
                   if isinstance(out, dict) else None)
        if not isinstance(context, str) or not context.strip():
            return []
        lines = [ln.strip() for ln in context.strip().splitlines()]
        facts = [ln for ln in lines if FACT_LINE.match(ln)]  # factbank's "- #12 (trust ..."
        if facts:
            return [{"kind": "status", "text": (
                f"{name} hook added {len(facts)} fact{'' if len(facts) == 1 else 's'} "
                f"({len(context)} chars of context), first: {_args(facts[0], 160)}")}]
        return [{"kind": "status", "text": (
            f"{name} hook added {len(context)} chars of context: {_args(lines[0], 160)}")}]

    def _assistant(self, message: dict) -> list[Draft]:
        out: list[Draft] = []
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                out += self.message(str(block.get("text") or ""))
            elif block.get("type") == "tool_use":
                name = str(block.get("name") or "?")
                args = block.get("input") if isinstance(block.get("input"), dict) else {}
                if name == "Bash" or name in CLAUDE_EDIT_TOOLS:
                    self.pending[str(block.get("id"))] = (name, args)
                else:
                    out.append(self.tool(name, args))
        return out

    def _results(self, message: dict) -> list[Draft]:
        out: list[Draft] = []
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            name, args = self.pending.pop(str(block.get("tool_use_id")), ("", {}))
            text = _text(block.get("content"))
            failed = bool(block.get("is_error"))
            if name == "Bash":
                m = EXIT_CODE.match(text) if failed else None
                code = 0 if not failed else (int(m.group(1)) if m else None)
                output = text[m.end():].lstrip("\n") if m else text
                out.append(self.command(str(args.get("command") or ""), code, output))
            elif name in CLAUDE_EDIT_TOOLS:
                path = str(args.get("file_path") or args.get("notebook_path") or "?")
                out.append(self.error(f"{name} {path} failed: {_tail(text, 300)}") if failed
                           else self.edit(path, name))
            elif failed:
                out.append(self.error(_tail(text, 500)))
        return out

    def _result(self, obj: dict) -> list[Draft]:
        if obj.get("result") and not self.summary:
            self.summary = str(obj["result"])
        out = [{"kind": "status", "text": f"result: {obj.get('subtype', '?')} after "
                f"{obj.get('num_turns', '?')} turns, {obj.get('duration_ms', '?')} ms"}]
        for denied in obj.get("permission_denials") or []:
            if isinstance(denied, dict):
                out.append(self.error(f"permission denied: {denied.get('tool_name', '?')} "
                                      f"{_args(denied.get('tool_input') or {})}"))
        if obj.get("is_error"):
            self.harness_error = str(obj.get("result") or obj.get("subtype") or "error")
            out.append(self.error(self.harness_error))
        return out


SHELL_WRAP = re.compile(r"^(?:/bin/|/usr/bin/)?(?:ba|z)?sh -l?c '(.*)'$", re.S)


def unwrap_shell(command: str) -> str:
    """`/bin/bash -lc 'echo hi'` -> `echo hi` (Codex shows the command as it ran it)."""
    m = SHELL_WRAP.match(command)
    return m.group(1).replace("'\\''", "'") if m else command


class CodexParser(Parser):
    """`codex exec --json TASK`."""

    agent = "codex"

    def feed(self, obj: dict[str, Any]) -> list[Draft]:
        kind = obj.get("type")
        if kind == "thread.started":
            self.session_id = str(obj.get("thread_id") or "") or None
            return [{"kind": "status", "text": f"session {self.session_id}"}]
        if kind == "item.started":
            item = obj.get("item") or {}
            if item.get("type") in ("mcp_tool_call", "web_search"):
                return [self.tool(str(item.get("tool") or item.get("type")),
                                  item.get("arguments") or item.get("query") or "")]
            return []
        if kind == "item.completed":
            return self._item(obj.get("item") or {})
        if kind == "turn.failed":
            err = (obj.get("error") or {}).get("message") or "turn failed"
            self.harness_error = str(err)
            return [self.error(self.harness_error)]
        if kind == "error":
            return [self.error(str(obj.get("message") or "error"))]
        if kind == "turn.completed":
            usage = obj.get("usage") or {}
            return [{"kind": "status", "text": f"turn completed ({usage.get('input_tokens', '?')}"
                     f" tokens in, {usage.get('output_tokens', '?')} out)"}]
        return []

    def _item(self, item: dict) -> list[Draft]:
        kind = item.get("type")
        if kind == "command_execution":
            code = item.get("exit_code")
            return [self.command(unwrap_shell(str(item.get("command") or "")),
                                 int(code) if isinstance(code, int) else None,
                                 str(item.get("aggregated_output") or ""))]
        if kind == "file_change":
            if item.get("status") == "failed":
                return [self.error("patch failed: " + ", ".join(
                    str(c.get("path")) for c in item.get("changes") or []))]
            return [self.edit(str(c.get("path") or "?"), str(c.get("kind") or "update"))
                    for c in item.get("changes") or [] if isinstance(c, dict)]
        if kind == "agent_message":
            return self.message(str(item.get("text") or ""))
        if kind == "error":
            return [self.error(str(item.get("message") or "error"))]
        if kind == "mcp_tool_call" and item.get("status") == "failed":
            return [self.error(f"{item.get('tool')}: {(item.get('error') or {}).get('message')}")]
        return []


PI_EXIT = re.compile(r"\s*Command exited with code (-?\d+)\s*$")


class PiParser(Parser):
    """`pi -p --mode json TASK`."""

    agent = "pi"

    def __init__(self, cwd: str = ".") -> None:
        super().__init__(cwd)
        self.pending: dict[str, dict] = {}  # tool call id -> its args (the end has none)

    def feed(self, obj: dict[str, Any]) -> list[Draft]:
        kind = obj.get("type")
        if kind == "session":
            self.session_id = str(obj.get("id") or "") or None
            return [{"kind": "status", "text": f"session {self.session_id}"}]
        if kind == "message_end":
            message = obj.get("message") or {}
            if message.get("role") != "assistant":
                return []
            out = self.message(_text(message.get("content")))
            if message.get("stopReason") == "error":
                self.harness_error = str(message.get("errorMessage") or "model error")
                out.append(self.error(self.harness_error))
            return out
        if kind == "tool_execution_start":
            name = str(obj.get("toolName") or "?")
            args = obj.get("args") if isinstance(obj.get("args"), dict) else {}
            if name == "bash" or name in PI_EDIT_TOOLS:
                self.pending[str(obj.get("toolCallId"))] = args
                return []
            return [self.tool(name, obj.get("args") or {})]
        if kind == "tool_execution_end":
            return self._end(obj)
        return []

    def _end(self, obj: dict) -> list[Draft]:
        name = str(obj.get("toolName") or "?")
        args = self.pending.pop(str(obj.get("toolCallId")), None) or (
            obj.get("args") if isinstance(obj.get("args"), dict) else {})
        text = _text(obj.get("result"))
        failed = bool(obj.get("isError"))
        if name == "bash":
            m = PI_EXIT.search(text)
            code = int(m.group(1)) if m else (None if failed else 0)
            return [self.command(str(args.get("command") or ""), code,
                                 text[: m.start()] if m else text)]
        if name in PI_EDIT_TOOLS:
            path = str(args.get("path") or "?")
            if failed:
                return [self.error(f"{name} {path} failed: {_tail(text, 300)}")]
            return [self.edit(path, name)]
        return [self.error(f"{name} failed: {_tail(text, 500)}")] if failed else []


PARSERS: dict[str, type[Parser]] = {"claude": ClaudeParser, "codex": CodexParser, "pi": PiParser}


def parser_for(agent: str, cwd: str = ".") -> Parser:
    return PARSERS[agent](cwd)
