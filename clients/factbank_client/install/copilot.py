"""`factbank install copilot`: GitHub Copilot CLI.

* Command hooks in `~/.copilot/settings.json` `hooks`, Copilot's own shape: camelCase events,
  each a flat list of handlers `{"type": "command", "bash": "...", "timeoutSec": N}` (no
  matcher groups). sessionStart and userPromptSubmitted give the blocks (`{"additionalContext"}`
  output: a user message before the prompt, and a `<system_reminder>` after it, seen in
  1.0.102), agentStop the reminder (`decision: block` + `reason` = the next prompt),
  postToolUse and sessionEnd the timeline. `hooks.py <event> copilot` (hookadapt translates
  the camelCase payloads).
* The stdio MCP server in `~/.copilot/mcp-config.json` `mcpServers.factbank` (`type: local`,
  `tools: ["*"]`); Copilot names its tools `factbank-<tool>`.
* The instruction block in `~/.copilot/copilot-instructions.md` (the user-level file Copilot
  reads into every session).

Repository hooks (`.github/hooks/*.json`) need folder trust and are the repository's business:
the installer writes only the user's files. `COPILOT_HOME` (another config directory) is
not followed yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factbank_client.install import common as base
from factbank_client.install import files

EVENTS = {"sessionStart": "session-start", "userPromptSubmitted": "user-prompt-submit",
          "agentStop": "stop", "postToolUse": "post-tool-use", "sessionEnd": "session-end"}


def copilot_dir(paths: base.Paths) -> Path:
    return paths.home / ".copilot"


def is_ours(handler: Any) -> bool:
    if not isinstance(handler, dict):
        return False
    command = str(handler.get("bash") or handler.get("command") or "").replace("\\", "/")
    return files.HOOK_SCRIPT_MARKER in command or files.HOOK_MARKER in command


def handlers(launcher: base.Launcher) -> dict[str, dict]:
    return {event: {"type": "command",
                    "bash": f"{base.hook_command(ours, launcher.python, launcher.script)} "
                            "copilot",
                    "timeoutSec": base.HOOK_TIMEOUT}
            for event, ours in EVENTS.items()}


def set_hooks(data: dict, wanted: dict[str, dict], created: list) -> None:
    """Our handler in each event's list: replaced in place, duplicates dropped, else
    appended (the user's handlers keep their order)."""
    files.ensure(data, ("hooks",), dict, created)
    for event, handler in wanted.items():
        current = files.ensure(data, ("hooks", event), list, created)
        out, placed = [], False
        for h in current:
            if not is_ours(h):
                out.append(h)
            elif not placed:
                out.append(dict(handler))
                placed = True
        if not placed:
            out.append(dict(handler))
        data["hooks"][event] = out


def remove_hooks(data: dict) -> None:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        current = hooks[event]
        if not isinstance(current, list):
            continue
        kept = [h for h in current if not is_ours(h)]
        if len(kept) != len(current):
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]


def server(launcher: base.Launcher) -> dict:
    return {"type": "local", "command": launcher.python, "args": base.mcp_args("copilot"),
            "tools": ["*"]}


def install(edits: base.Edits, entry: dict, paths: base.Paths, launcher: base.Launcher,
            notes: list[str]) -> None:
    root = copilot_dir(paths)
    path = root / "settings.json"
    data, style = base.json_of(edits, path)
    before, created = base.deep_copy(data), []
    set_hooks(data, handlers(launcher), created)
    if data.get("disableAllHooks"):
        notes.append(f"{path} has disableAllHooks: factbank's hooks will not run")
    base.record_file(entry, path, created_file=not edits.existed(path), containers=created)
    base.write_json(edits, entry, path, before, data, style)

    path = root / "mcp-config.json"
    data, style = base.json_of(edits, path)
    before, created = base.deep_copy(data), []
    servers = files.ensure(data, ("mcpServers",), dict, created)
    if base.MCP_NAME in servers and not files.is_our_mcp(servers[base.MCP_NAME]):
        notes.append(f"replaced a '{base.MCP_NAME}' MCP server in {path} that was not "
                     "factbank's stdio server")
    servers[base.MCP_NAME] = server(launcher)
    base.record_file(entry, path, created_file=not edits.existed(path), containers=created)
    base.write_json(edits, entry, path, before, data, style)

    base.install_block(edits, entry, root / "copilot-instructions.md")


def uninstall(edits: base.Edits, entry: dict, paths: base.Paths) -> None:
    root = copilot_dir(paths)
    path = root / "settings.json"
    if edits.read(path) is not None:
        data, style = base.json_of(edits, path)
        before = base.deep_copy(data)
        remove_hooks(data)
        files.prune_created(data, base.file_record(entry, path).get("containers", []))
        base.write_json(edits, entry, path, before, data, style, uninstall=True)
    path = root / "mcp-config.json"
    if edits.read(path) is not None:
        data, style = base.json_of(edits, path)
        before = base.deep_copy(data)
        servers = data.get("mcpServers")
        if isinstance(servers, dict) and files.is_our_mcp(servers.get(base.MCP_NAME)):
            del servers[base.MCP_NAME]
        files.prune_created(data, base.file_record(entry, path).get("containers", []))
        base.write_json(edits, entry, path, before, data, style, uninstall=True)
    base.uninstall_block(edits, entry, root / "copilot-instructions.md")


def present(paths: base.Paths) -> bool:
    return copilot_dir(paths).is_dir()
