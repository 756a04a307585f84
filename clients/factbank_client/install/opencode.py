"""`factbank install opencode`: OpenCode (sst/opencode), through its plugin system.

OpenCode has no command hooks. It loads every `.ts`/`.js` file in `~/.config/opencode/plugins/`
at start; factbank's plugin (`assets/opencode/factbank.ts`, written with the hook command
filled in) runs factbank's hook for each moment: `chat.message` -> the prompt block (and, on
a session's first prompt, the session-start block and its handoffs; hookmain), added to the
user message as a synthetic text part; `tool.execute.after` -> the timeline (`write`, `edit`,
`bash` with its exit code); `session.idle` -> the stop reminder, which rides on the next
prompt (a plugin cannot hold OpenCode's turn open). Also:

* the stdio MCP server as `mcp.factbank` in `~/.config/opencode/opencode.json` (`type:
  local`, the command as one list); OpenCode names its tools `factbank_<tool>`;
* the instruction block in `~/.config/opencode/AGENTS.md` (OpenCode's global rules file).

A trap seen in 1.18.33 (tests/harness/README.md): in a config directory without
`node_modules/` OpenCode runs `npm install @opencode-ai/plugin` in the background at every
start. That is OpenCode's own behaviour, with or without this plugin (which imports nothing).
An `opencode.jsonc` is not edited (comments): the server goes into `opencode.json`, which
OpenCode merges with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factbank_client.errors import InstallError
from factbank_client.install import common as base
from factbank_client.install import files

PLUGIN = "factbank.ts"
MARKER = "factbank-opencode-plugin"
HOOK_SLOT = "/* factbank:hook */ []"


def config_dir(paths: base.Paths) -> Path:
    return paths.config_dir.parent / "opencode"  # $XDG_CONFIG_HOME/opencode


def plugin_path(paths: base.Paths) -> Path:
    return config_dir(paths) / "plugins" / PLUGIN


def plugin_text(launcher: base.Launcher) -> str:
    text = base.asset_text("opencode", PLUGIN)
    if text.count(HOOK_SLOT) != 1:
        raise InstallError(f"the packaged {PLUGIN} lacks its hook slot")
    command = [launcher.python, "-I", "-S", launcher.script]
    return text.replace(HOOK_SLOT, "/* factbank:hook */ " + json.dumps(command))


def is_our_server(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), list):
        return False
    return files.is_our_mcp({"command": entry["command"][0], "args": entry["command"][1:]})


def server(launcher: base.Launcher) -> dict:
    return {"type": "local", "command": [launcher.python, *base.mcp_args("opencode")],
            "enabled": True}


def install(edits: base.Edits, entry: dict, paths: base.Paths, launcher: base.Launcher,
            notes: list[str]) -> None:
    plugin = plugin_path(paths)
    text = edits.read(plugin)
    if text is not None and MARKER not in text:
        raise InstallError(f"{plugin} exists and is not factbank's plugin; move it away "
                                "first")
    new = plugin_text(launcher)
    base.record_file(entry, plugin, created_file=text is None)
    if new != text:
        edits.write(plugin, new)

    path = config_dir(paths) / "opencode.json"
    data, style = base.json_of(edits, path)
    before, created = base.deep_copy(data), []
    servers = files.ensure(data, ("mcp",), dict, created)
    if base.MCP_NAME in servers and not is_our_server(servers[base.MCP_NAME]):
        notes.append(f"replaced a '{base.MCP_NAME}' MCP server in {path} that was not "
                     "factbank's stdio server")
    servers[base.MCP_NAME] = server(launcher)
    base.record_file(entry, path, created_file=not edits.existed(path), containers=created)
    base.write_json(edits, entry, path, before, data, style)
    base.install_block(edits, entry, config_dir(paths) / "AGENTS.md")


def uninstall(edits: base.Edits, entry: dict, paths: base.Paths) -> None:
    plugin = plugin_path(paths)
    text = edits.read(plugin)
    if text is not None and MARKER in text:
        edits.write(plugin, None)
    path = config_dir(paths) / "opencode.json"
    if edits.read(path) is not None:
        data, style = base.json_of(edits, path)
        before = base.deep_copy(data)
        servers = data.get("mcp")
        if isinstance(servers, dict) and is_our_server(servers.get(base.MCP_NAME)):
            del servers[base.MCP_NAME]
        files.prune_created(data, base.file_record(entry, path).get("containers", []))
        base.write_json(edits, entry, path, before, data, style, uninstall=True)
    base.uninstall_block(edits, entry, config_dir(paths) / "AGENTS.md")


def present(paths: base.Paths) -> bool:
    return config_dir(paths).is_dir()
