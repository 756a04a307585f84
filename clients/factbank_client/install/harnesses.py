"""`factbank install|uninstall claude|codex|pi|all`: wire factbank into the agent harnesses.

What each harness gets (all in the user's home, never in a project):

* Claude Code: command hooks in `~/.claude/settings.json`: SessionStart, UserPromptSubmit
  and Stop (facts in, the save reminder), PostToolUse of the edit tools and Bash,
  PostToolUseFailure of Bash and SessionEnd (the timeline); the stdio MCP server in
  `~/.claude.json` `mcpServers` (user scope); `permissions.allow` for factbank's
  non-destructive tools (`claude -p` denies tools that would need a prompt); and the
  instruction block in `~/.claude/CLAUDE.md`.
* Codex: the same hooks in `~/.codex/hooks.json` (PostToolUse for every tool, a chance to
  read the rollout for the edits Codex reports no hook for; no PostToolUseFailure, which
  Codex lacks), `[mcp_servers.factbank]` in `~/.codex/config.toml` (no token in it: the
  server reads the factbank client config, and `env_vars` passes FACTBANK_* through), the
  block in `~/.codex/AGENTS.md`. Codex runs a hook only once the user trusted it (`/hooks`
  in Codex, or `--trust` here).
* Pi: the extension `~/.pi/agent/extensions/factbank.ts` (Pi has no command hooks and no MCP)
  and the block in `~/.pi/agent/AGENTS.md`. The extension is written from the package's
  `assets/pi/factbank.ts` with the tool texts of `assets/tools.toml` and the constants of
  `schema.py` filled in (`pi_extension_text`), so Pi describes its tools in the MCP server's
  words; a re-install after an upgrade rewrites it with the new texts.

Why it is built like this (docs/principles.md#installers-respect-the-users-files): every edit is
computed first as (path, old text, new
text), so `--dry-run` prints exactly the diff that would be written; entries are found again by
marker (installer_files), so a re-run replaces them in place even from another install path;
and a manifest records which files and containers the installer created, so uninstall removes
exactly what was added and deletes only files it created.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factbank_client import safefs
from factbank_client.errors import InstallError, TextEditFailed, UnsafePath
from factbank_client.install import files
from factbank_client.install import toml_table as toml
from factbank_client.install.common import (
    CLAUDE_ALLOW,
    CODEX_ENV_VARS,
    HARNESSES,
    MCP_AGENT,
    MCP_NAME,
    OPTIONAL,
    PI_MARKER,
    Change,
    Edits,
    Launcher,
    Paths,
    deep_copy,
    file_record,
    install_block,
    install_hooks,
    json_of,
    load_manifest,
    mcp_args,
    pi_extension_text,
    record_file,
    uninstall_block,
    uninstall_hooks,
    write_json,
)

# --- Claude Code -------------------------------------------------------------------------------


def install_claude(edits: Edits, entry: dict, paths: Paths, launcher: Launcher,
                   notes: list[str]) -> None:
    settings = paths.claude_settings()
    install_hooks(edits, entry, settings, launcher, "claude")
    data, style = json_of(edits, settings)
    before, created = deep_copy(data), []
    allow = files.ensure(data, ("permissions", "allow"), list, created)
    added = [t for t in CLAUDE_ALLOW if t not in allow]
    allow.extend(added)
    record_file(entry, settings, containers=created, allow=added)
    write_json(edits, entry, settings, before, data, style)

    cj = paths.claude_json
    data, style = json_of(edits, cj)
    before, created = deep_copy(data), []
    servers = files.ensure(data, ("mcpServers",), dict, created)
    if MCP_NAME in servers and not files.is_our_mcp(servers[MCP_NAME]):
        notes.append(f"replaced a '{MCP_NAME}' MCP server in {cj} that was not factbank's "
                     "stdio server")
    servers[MCP_NAME] = {"type": "stdio", "command": launcher.python,
                         "args": mcp_args(MCP_AGENT["claude"]), "env": {}}
    record_file(entry, cj, created_file=not edits.existed(cj), containers=created)
    write_json(edits, entry, cj, before, data, style)

    install_block(edits, entry, paths.claude_dir / "CLAUDE.md")


def uninstall_claude(edits: Edits, entry: dict, paths: Paths) -> None:
    settings = paths.claude_settings()
    uninstall_hooks(edits, entry, settings)
    if edits.read(settings) is not None:
        data, style = json_of(edits, settings)
        before = deep_copy(data)
        ours = set(file_record(entry, settings).get("allow", []))
        allow = (data.get("permissions") or {}).get("allow")
        if isinstance(allow, list) and ours:
            data["permissions"]["allow"] = [t for t in allow if t not in ours]
        files.prune_created(data, file_record(entry, settings).get("containers", []))
        write_json(edits, entry, settings, before, data, style, uninstall=True)

    cj = paths.claude_json
    if edits.read(cj) is not None:
        data, style = json_of(edits, cj)
        before = deep_copy(data)
        servers = data.get("mcpServers")
        if isinstance(servers, dict) and files.is_our_mcp(servers.get(MCP_NAME)):
            del servers[MCP_NAME]
        files.prune_created(data, file_record(entry, cj).get("containers", []))
        write_json(edits, entry, cj, before, data, style, uninstall=True)

    uninstall_block(edits, entry, paths.claude_dir / "CLAUDE.md")


# --- Codex -------------------------------------------------------------------------------------


def _codex_server(launcher: Launcher) -> dict[str, Any]:
    return {
        "command": launcher.python,
        "args": mcp_args(MCP_AGENT["codex"]),
        # The server reads the factbank client config itself; these only pass overrides on.
        "env_vars": list(CODEX_ENV_VARS),
        # `codex exec` runs with approval policy "never": without this every call is refused.
        "default_tools_approval_mode": "approve",
    }


def _toml_doc(edits: Edits, path: Path) -> dict:
    try:
        return tomllib.loads(edits.read(path) or "")
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); nothing was changed") from exc


def install_codex(edits: Edits, entry: dict, paths: Paths, launcher: Launcher,
                  notes: list[str]) -> None:
    install_hooks(edits, entry, paths.codex_hooks(), launcher, "codex")

    path = paths.codex_config()
    doc = _toml_doc(edits, path)
    current = toml.lookup(doc, ("mcp_servers", MCP_NAME))
    if current is not None and not files.is_our_mcp(current):
        notes.append(f"replaced an [mcp_servers.{MCP_NAME}] in {path} that was not factbank's")
    if (doc.get("features") or {}).get("hooks") is False:
        notes.append(f"{path} has [features] hooks = false: Codex will not run factbank's "
                     "hooks until that is removed")
    server = _codex_server(launcher)
    record_file(entry, path, created_file=not edits.existed(path))
    if current != server:
        try:
            text, created = toml.put(edits.read(path) or "", ("mcp_servers", MCP_NAME), server)
        except TextEditFailed as exc:
            raise InstallError(f"cannot edit {path} safely ({exc}): its mcp_servers are "
                               "written as dotted keys or inline tables; nothing was changed"
                               ) from exc
        record_file(entry, path, containers=created)
        edits.write(path, text)

    install_block(edits, entry, paths.codex_dir / "AGENTS.md")


def uninstall_codex(edits: Edits, entry: dict, paths: Paths) -> None:
    uninstall_hooks(edits, entry, paths.codex_hooks())
    path = paths.codex_config()
    old = edits.read(path)
    if old is not None:
        doc = _toml_doc(edits, path)
        rec = file_record(entry, path)
        text = old
        try:
            if files.is_our_mcp(toml.lookup(doc, ("mcp_servers", MCP_NAME))):
                text = toml.drop(text, ("mcp_servers", MCP_NAME))
            for key in rec.get("trusted", []):
                text = toml.drop(text, ("hooks", "state", key))
        except TextEditFailed as exc:
            raise InstallError(f"cannot edit {path} safely ({exc}); remove "
                               f"[mcp_servers.{MCP_NAME}] by hand") from exc
        text = toml.prune_empty(text, rec.get("containers", []))
        if rec.get("created") and not text.strip():
            edits.write(path, None)
        elif text != old:
            edits.write(path, text)
    uninstall_block(edits, entry, paths.codex_dir / "AGENTS.md")


# --- Pi ----------------------------------------------------------------------------------------


def _ours_whole(entry: dict, path: Path, text: str) -> bool:
    """A file wholly factbank's, proved: its sha256 is the one the manifest recorded when it
    was written, or (installs older than that record) the manifest says factbank created it
    and it still carries PI_MARKER, or it is exactly the text this version writes. Text that
    merely mentions the marker is not proof."""
    rec = file_record(entry, path)
    if text == pi_extension_text():
        return True
    if rec.get("sha256"):
        return hashlib.sha256(text.encode("utf-8")).hexdigest() == rec["sha256"]
    return bool(rec.get("created")) and PI_MARKER in text


def install_pi(edits: Edits, entry: dict, paths: Paths, launcher: Launcher,
               notes: list[str]) -> None:
    del launcher, notes
    ext = paths.pi_extension()
    text = edits.read(ext)
    new = pi_extension_text()
    if text is not None and text != new and not _ours_whole(entry, ext, text):
        raise InstallError(f"{ext} exists and is not factbank's extension; move it away first")
    record_file(entry, ext, created_file=text is None)
    file_record(entry, ext)["sha256"] = hashlib.sha256(new.encode("utf-8")).hexdigest()
    if new != text:
        edits.write(ext, new)
    install_block(edits, entry, paths.pi_dir / "AGENTS.md")


def uninstall_pi(edits: Edits, entry: dict, paths: Paths) -> None:
    ext = paths.pi_extension()
    text = edits.read(ext)
    if text is not None and _ours_whole(entry, ext, text):
        edits.write(ext, None)
    uninstall_block(edits, entry, paths.pi_dir / "AGENTS.md")


INSTALL = {"claude": install_claude, "codex": install_codex, "pi": install_pi}
UNINSTALL = {"claude": uninstall_claude, "codex": uninstall_codex, "pi": uninstall_pi}


def _register_next() -> dict:
    """Gemini CLI, Qwen Code (installer_gemini), OpenCode, Copilot CLI: their own modules."""
    from functools import partial

    from factbank_client.install import copilot as installer_copilot
    from factbank_client.install import gemini as installer_gemini
    from factbank_client.install import opencode as installer_opencode

    for h in ("gemini", "qwen"):
        INSTALL[h] = partial(installer_gemini.install, h)
        UNINSTALL[h] = partial(installer_gemini.uninstall, h)
    INSTALL["opencode"], UNINSTALL["opencode"] = installer_opencode.install, \
        installer_opencode.uninstall
    INSTALL["copilot"], UNINSTALL["copilot"] = installer_copilot.install, \
        installer_copilot.uninstall
    return {"gemini": lambda p: installer_gemini.present(p, "gemini"),
            "qwen": lambda p: installer_gemini.present(p, "qwen"),
            "opencode": installer_opencode.present, "copilot": installer_copilot.present}


def registered(harness: str, paths: Paths) -> int:
    """How many factbank hooks `harness`'s own files hold now (for the dashboard's health
    page: the manifest says what was installed, this says what is still there). Pi and
    OpenCode have an extension/plugin file instead: 1 when it is there."""
    from factbank_client.install import copilot as installer_copilot
    from factbank_client.install import gemini as installer_gemini
    from factbank_client.install import opencode as installer_opencode

    def handlers(path: Path) -> int:
        try:
            data = files.load_json(path.read_bytes().decode("utf-8"))[0]
        except (OSError, ValueError):
            return 0
        if harness == "copilot":
            return sum(installer_copilot.is_ours(h) for hs in (data.get("hooks") or {}).values()
                       if isinstance(hs, list) for h in hs)
        return len(files.our_handlers(data))

    if harness in ("gemini", "qwen"):
        return handlers(installer_gemini.settings_path(paths, harness))
    if harness == "copilot":
        return handlers(installer_copilot.copilot_dir(paths) / "settings.json")
    if harness == "opencode":
        return int(installer_opencode.plugin_path(paths).exists())
    if harness == "pi":
        return int(paths.pi_extension().exists())
    return handlers(paths.claude_settings() if harness == "claude" else paths.codex_hooks())


# --- plans --------------------------------------------------------------------------------------


@dataclass
class Plan:
    changes: list[Change]
    manifest: Change | None
    notes: list[str]
    paths: Paths

    def diff(self) -> str:
        return "".join(c.diff() for c in self.changes)

    @property
    def empty(self) -> bool:
        return not self.changes


def _missing_dirs(path: Path) -> list[str]:
    out = []
    for parent in path.parents:
        if parent.exists():
            break
        out.append(str(parent))
    return out


def _manifest_change(paths: Paths, manifest: dict) -> Change | None:
    try:
        data = safefs.read_own(paths.manifest)
    except UnsafePath as exc:
        raise InstallError(str(exc)) from None
    old = None if data is None else data.decode("utf-8", "replace")
    new = None if not manifest["harnesses"] else json.dumps(manifest, indent=2) + "\n"
    return None if old == new else Change(paths.manifest, old, new)


# The program each harness runs as, looked up on PATH by `present`.
HARNESS_BIN = {"claude": "claude", "codex": "codex", "pi": "pi", **OPTIONAL}


def present(harness: str, paths: Paths) -> bool:
    """Whether `harness` is on this machine: its own directory exists (it ran once, or the
    user made it) or its program is on PATH. `install all` writes only for these (it used to
    create ~/.pi/agent and ~/.codex for harnesses the user never had)."""
    import shutil

    if harness in OPTIONAL:
        found = PRESENT[harness](paths)
    else:
        found = {"claude": paths.claude_dir, "codex": paths.codex_dir,
                 "pi": paths.pi_dir}[harness].is_dir()
    return found or shutil.which(HARNESS_BIN[harness]) is not None


def expand(names: list[str] | tuple[str, ...], paths: Paths | None = None, *,
           every: bool = False) -> list[str]:
    """The harnesses `names` stand for, for the library: `all` is Claude Code, Codex, Pi and
    each optional harness present under `paths`; with `every` (uninstall) all of them, since
    removing what is not there changes nothing. `factbank install all` is stricter: it asks
    `present` for every harness, the first three included (cli/install.py)."""
    chosen: list[str] = []
    for name in names:
        group = [h for h in HARNESSES if h not in OPTIONAL or every
                 or (paths is not None and present(h, paths))]
        for h in (group if name == "all" else (name,)):
            if h not in HARNESSES:
                raise InstallError(f"unknown harness {h!r} (choose from "
                                   f"{', '.join(HARNESSES)}, all)")
            if h not in chosen:
                chosen.append(h)
    return chosen


def plan_install(names: list[str] | tuple[str, ...], paths: Paths,
                 launcher: Launcher | None = None) -> Plan:
    launcher = launcher or Launcher.current()
    manifest = load_manifest(paths)
    edits, notes = Edits(), []
    chosen = expand(names, paths)
    for h in chosen:
        entry = manifest["harnesses"].setdefault(h, {})
        INSTALL[h](edits, entry, paths, launcher, notes)
    changes = edits.changes()
    for c in changes:
        if c.old is None and c.new is not None:
            for h in chosen:
                entry = manifest["harnesses"][h]
                if str(c.path) in entry.get("files", {}):
                    record_file(entry, c.path, dirs=_missing_dirs(c.path))
    return Plan(changes, _manifest_change(paths, manifest), notes, paths)


def plan_uninstall(names: list[str] | tuple[str, ...], paths: Paths) -> Plan:
    manifest = load_manifest(paths)
    edits, notes = Edits(), []
    for h in expand(names, every=True):
        entry = manifest["harnesses"].get(h, {})
        UNINSTALL[h](edits, entry, paths)
        manifest["harnesses"].pop(h, None)
    return Plan(edits.changes(), _manifest_change(paths, manifest), notes, paths)


def _created_dirs(plan: Plan) -> list[str]:
    """Directories a previous install created for files this uninstall deletes."""
    manifest = load_manifest(plan.paths)
    dirs: list[str] = []
    for entry in manifest["harnesses"].values():
        for path, rec in (entry.get("files") or {}).items():
            if any(c.path == Path(path) and c.new is None for c in plan.changes):
                dirs += [d for d in rec.get("dirs", []) if d not in dirs]
    return sorted(dirs, key=len, reverse=True)


# Files that hold secrets of their own (Claude Code keeps its account state in ~/.claude.json):
# created 0600 when they do not exist yet.
PRIVATE_NAMES = (".claude.json",)


def write_text(path: Path, text: str, *, private: bool = False) -> None:
    """safefs.write, keeping an existing file's permission bits (settings may be 0600); a new
    file gets the umask's mode, or 0600 when `private` or a file in PRIVATE_NAMES (it may hold
    ~/.claude.json's account state). Never through or over a link."""
    private = private or (path.name in PRIVATE_NAMES and not os.path.lexists(path))
    try:
        safefs.write(path, text, private=private)
    except UnsafePath as exc:
        raise InstallError(str(exc)) from None
    except OSError as exc:  # e.g. its folder is a dangling link
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from None


def _unchanged(c: Change) -> None:
    """The file still holds what the plan read (`c.old`): install and uninstall change only
    bytes they know, never a file edited (or replaced by a link) since."""
    try:
        data = safefs.read_own(c.path)
    except UnsafePath as exc:
        raise InstallError(f"{exc}; nothing more was changed") from None
    now = None if data is None else data.decode("utf-8", "replace")
    if now != c.old:
        raise InstallError(f"{c.path} changed while factbank was editing it; run the command "
                           "again")


def apply(plan: Plan) -> None:
    rmdirs = _created_dirs(plan)
    for c in plan.changes:
        _unchanged(c)
        if c.new is None:
            c.path.unlink(missing_ok=True)
        else:
            write_text(c.path, c.new)
    for d in rmdirs:
        try:
            Path(d).rmdir()  # only when empty
        except OSError:
            pass
    if plan.manifest is not None:
        if plan.manifest.new is None:
            plan.manifest.path.unlink(missing_ok=True)
        else:
            # Private: it keeps the original text of the files it changed.
            write_text(plan.manifest.path, plan.manifest.new, private=True)


PRESENT = _register_next()
