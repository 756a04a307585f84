"""`factbank install gemini|qwen`: Gemini CLI and Qwen Code (a fork of it), one design.

Each gets, in its own `settings.json` (`~/.gemini/`, `~/.qwen/`):

* command hooks (`hooks.py <event> gemini|qwen`, hookadapt translates): the session-start
  block, the per-prompt block, the stop reminder, and the timeline's file edits and commands.
  Gemini's names: SessionStart, BeforeAgent (the prompt), AfterAgent (the stop: `decision:
  block` makes another turn with the reason as the prompt), AfterTool, SessionEnd. Qwen uses
  Claude Code's names (UserPromptSubmit, Stop, PostToolUse, ...). Both take the timeout in
  milliseconds and match tools by a regex on the tool name;
* the stdio MCP server as `mcpServers.factbank` with `trust: true` (no confirmation per call:
  the same standing as Claude Code's `permissions.allow`; both harnesses ask otherwise);
* the instruction block in the user-level context file (`~/.gemini/GEMINI.md`,
  `~/.qwen/QWEN.md`), which both read into every session.

Seen in the real binaries (Gemini CLI 0.61.0, Qwen Code 0.15.10; tests/harness/
test_e2e_next.py): the blocks arrive as `<hook_context>` (Gemini) or an extra text part
(Qwen) of the user turn; Qwen fires no SessionStart in `-p` mode, so its first prompt hook
does that work (hookmain). Both parse settings.json with comments allowed; factbank edits
plain JSON only and refuses (changing nothing) a file with comments.
"""

from __future__ import annotations

from pathlib import Path

from factbank_client.install import common as base
from factbank_client.install import files

HOOK_TIMEOUT_MS = base.HOOK_TIMEOUT * 1000
# harness -> its event -> (our hook event, the tool matcher or None)
EVENTS: dict[str, dict[str, tuple[str, str | None]]] = {
    "gemini": {"SessionStart": ("session-start", None),
               "BeforeAgent": ("user-prompt-submit", None),
               "AfterAgent": ("stop", None),
               "AfterTool": ("post-tool-use", "write_file|replace|run_shell_command"),
               "SessionEnd": ("session-end", None)},
    "qwen": {"SessionStart": ("session-start", None),
             "UserPromptSubmit": ("user-prompt-submit", None),
             "Stop": ("stop", None),
             "PostToolUse": ("post-tool-use", "write_file|edit|run_shell_command"),
             "SessionEnd": ("session-end", None)},
}
DIRS = {"gemini": ".gemini", "qwen": ".qwen"}
CONTEXT_FILES = {"gemini": "GEMINI.md", "qwen": "QWEN.md"}


def harness_dir(paths: base.Paths, harness: str) -> Path:
    return paths.home / DIRS[harness]


def settings_path(paths: base.Paths, harness: str) -> Path:
    return harness_dir(paths, harness) / "settings.json"


def handlers(launcher: base.Launcher, harness: str) -> dict[str, dict]:
    return {event: {"type": "command",
                    "command": f"{base.hook_command(ours, launcher.python, launcher.script)} "
                               f"{harness}",
                    "timeout": HOOK_TIMEOUT_MS}
            for event, (ours, _) in EVENTS[harness].items()}


def matchers(harness: str) -> dict[str, str]:
    return {event: m for event, (_, m) in EVENTS[harness].items() if m}


def server(launcher: base.Launcher, harness: str) -> dict:
    return {"command": launcher.python, "args": base.mcp_args(harness), "trust": True}


def install(harness: str, edits: base.Edits, entry: dict, paths: base.Paths,
            launcher: base.Launcher, notes: list[str]) -> None:
    path = settings_path(paths, harness)
    data, style = base.json_of(edits, path)
    before, created = base.deep_copy(data), []
    files.set_hooks(data, handlers(launcher, harness), created, matchers(harness))
    servers = files.ensure(data, ("mcpServers",), dict, created)
    if base.MCP_NAME in servers and not files.is_our_mcp(servers[base.MCP_NAME]):
        notes.append(f"replaced a '{base.MCP_NAME}' MCP server in {path} that was not "
                     "factbank's stdio server")
    servers[base.MCP_NAME] = server(launcher, harness)
    if (data.get("hooksConfig") or {}).get("enabled") is False or data.get("disableAllHooks"):
        notes.append(f"{path} turns hooks off: factbank's hooks will not run until that is "
                     "removed")
    base.record_file(entry, path, created_file=not edits.existed(path), containers=created)
    base.write_json(edits, entry, path, before, data, style)
    base.install_block(edits, entry, harness_dir(paths, harness) / CONTEXT_FILES[harness])


def uninstall(harness: str, edits: base.Edits, entry: dict, paths: base.Paths) -> None:
    path = settings_path(paths, harness)
    if edits.read(path) is not None:
        data, style = base.json_of(edits, path)
        before = base.deep_copy(data)
        files.remove_hooks(data)
        servers = data.get("mcpServers")
        if isinstance(servers, dict) and files.is_our_mcp(servers.get(base.MCP_NAME)):
            del servers[base.MCP_NAME]
        files.prune_created(data, base.file_record(entry, path).get("containers", []))
        base.write_json(edits, entry, path, before, data, style, uninstall=True)
    base.uninstall_block(edits, entry, harness_dir(paths, harness) / CONTEXT_FILES[harness])


def present(paths: base.Paths, harness: str) -> bool:
    return harness_dir(paths, harness).is_dir()
