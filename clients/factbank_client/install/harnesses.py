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

Why it is built like this (principle 8): every edit is computed first as (path, old text, new
text), so `--dry-run` prints exactly the diff that would be written; entries are found again by
marker (installer_files), so a re-run replaces them in place even from another install path;
and a manifest records which files and containers the installer created, so uninstall removes
exactly what was added and deletes only files it created.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shlex
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from factbank_client import safefs, tools
from factbank_client.install import files as files
from factbank_client.install import toml_table as toml

HARNESSES = ("claude", "codex", "pi", "gemini", "qwen", "opencode", "copilot")
# `install all` takes these only when they are present (their config directory exists, or
# their binary is on PATH): installing into a harness nobody uses would create its files.
OPTIONAL = {"gemini": "gemini", "qwen": "qwen", "opencode": "opencode", "copilot": "copilot"}
HOOK_EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit",
               "Stop": "stop", "PostToolUse": "post-tool-use",
               "PostToolUseFailure": "post-tool-use-failure", "SessionEnd": "session-end"}
# Which events each harness gets, and the matcher (a regex on the tool name) of their group:
# Claude Code runs a PostToolUse hook only for the tools the timeline records (a process per
# Read or Grep would cost for nothing); Codex's PostToolUse takes every tool, since any of
# them is a chance to read its rollout (tests/harness/test_e2e_timeline.py saw both).
HARNESS_HOOKS: dict[str, dict[str, str | None]] = {
    "claude": {"SessionStart": None, "UserPromptSubmit": None, "Stop": None,
               "PostToolUse": "Edit|Write|MultiEdit|NotebookEdit|Bash",
               "PostToolUseFailure": "Bash", "SessionEnd": None},
    "codex": {"SessionStart": None, "UserPromptSubmit": None, "Stop": None,
              "PostToolUse": None, "SessionEnd": None},
}
HOOK_TIMEOUT = 5  # seconds; Codex's default is 600. The hook gives up after 0.9 s itself.
MCP_NAME = "factbank"
MCP_AGENT = {"claude": "claude-code", "codex": "codex"}
# Non-destructive tools Claude Code may call without a prompt (not delete/add_category).
CLAUDE_ALLOW = tuple(f"mcp__{MCP_NAME}__{t}" for t in
                     ("search", "get", "add", "confirm", "dispute", "supersede",
                      "list_categories", "handoff"))
CODEX_ENV_VARS = ("FACTBANK_CONFIG", "FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN",
                  "FACTBANK_TEAM_TOKEN")
PI_EXTENSION = "factbank.ts"
PI_MARKER = "factbank-extension"
# Where the extension's SHARED constant gets its value (see pi_extension_text).
PI_SHARED = "/* factbank:shared */ null as unknown as Shared"
MANIFEST_VERSION = 1


class InstallError(Exception):
    """A file we must not or cannot edit (unparsable, or someone else's): nothing written."""


# --- where things live ----------------------------------------------------------------------


@dataclass(frozen=True)
class Paths:
    home: Path
    claude_dir: Path
    claude_json: Path
    codex_dir: Path
    pi_dir: Path
    config_dir: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, home: Path | None = None) -> Paths:
        """The harnesses' own overrides (CLAUDE_CONFIG_DIR, CODEX_HOME, PI_CODING_AGENT_DIR,
        XDG_CONFIG_HOME) win over `home`'s defaults, as they do in the harnesses."""
        env = os.environ if env is None else env
        home = Path(home or env.get("HOME") or Path.home())
        claude_dir = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else None
        xdg = env.get("XDG_CONFIG_HOME")
        return cls(
            home=home,
            claude_dir=claude_dir or home / ".claude",
            claude_json=(claude_dir / ".claude.json") if claude_dir else home / ".claude.json",
            codex_dir=Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex",
            pi_dir=Path(env["PI_CODING_AGENT_DIR"]) if env.get("PI_CODING_AGENT_DIR")
            else home / ".pi" / "agent",
            config_dir=(Path(xdg) if xdg else home / ".config") / "factbank",
        )

    @property
    def manifest(self) -> Path:
        return self.config_dir / "install-manifest.json"

    def claude_settings(self) -> Path:
        return self.claude_dir / "settings.json"

    def codex_config(self) -> Path:
        return self.codex_dir / "config.toml"

    def codex_hooks(self) -> Path:
        return self.codex_dir / "hooks.json"

    def pi_extension(self) -> Path:
        return self.pi_dir / "extensions" / PI_EXTENSION


# --- what is run -----------------------------------------------------------------------------


def python_exe() -> str:
    """This interpreter, spelt the same way however factbank was started (`factbank` script
    -> .../python3, `python -m` -> .../python): the hook command must not change between
    re-installs, or Codex silently distrusts it."""
    exe = Path(sys.executable or "python3")
    for name in ("python3", "python"):
        candidate = exe.with_name(name)
        try:
            if candidate.exists() and candidate.resolve() == exe.resolve():
                return str(candidate)
        except OSError:
            continue
    return str(exe)


def hook_script() -> str:
    from factbank_client import hooks

    return str(Path(hooks.__file__).absolute())


def hook_command(event: str, python: str | None = None, script: str | None = None) -> str:
    """The exact hook command: the interpreter with `-I -S` (no site, no PYTHON* variables:
    ~30 ms instead of ~100+ ms to start) running hooks.py as a script. Keep it stable across
    re-installs: Codex trusts a hook by the hash of its handler, so any change disables it
    silently until the user trusts it again."""
    return (f"{shlex.quote(python or python_exe())} -I -S "
            f"{shlex.quote(script or hook_script())} {event}")


@dataclass(frozen=True)
class Launcher:
    """What the installed entries launch: this interpreter and this copy of hooks.py (tests
    pass another, to install "from another path")."""

    python: str = ""
    script: str = ""

    @classmethod
    def current(cls) -> Launcher:
        return cls(python_exe(), hook_script())


def hook_handlers(launcher: Launcher, harness: str) -> dict[str, dict]:
    """The handler of each event `harness` gets. The command of the first three never
    changed (Codex keeps trusting them across this upgrade)."""
    return {event: {"type": "command",
                    "command": hook_command(HOOK_EVENTS[event], launcher.python,
                                            launcher.script),
                    "timeout": HOOK_TIMEOUT}
            for event in HARNESS_HOOKS[harness]}


def hook_matchers(harness: str) -> dict[str, str]:
    return {event: m for event, m in HARNESS_HOOKS[harness].items() if m is not None}


def mcp_args(agent: str) -> list[str]:
    return ["-P", "-m", "factbank_client.cli.main", "mcp", "--agent", agent]


def asset_text(*parts: str) -> str:
    return resources.files("factbank_client").joinpath("assets", *parts).read_text("utf-8")


def pi_extension_text() -> str:
    """The Pi extension as installed: the asset with `tools.pi_shared()` (the tool texts and
    the wire constants) written in as a JSON literal where SHARED is declared."""
    text = asset_text("pi", PI_EXTENSION)
    if text.count(PI_SHARED) != 1:
        raise InstallError(f"the packaged {PI_EXTENSION} lacks its SHARED declaration")
    # The background verify at session start (issue 16), as the hooks run it: this
    # interpreter, with site (the CLI needs httpx).
    from factbank_client.hook.verify import VERIFY_ARGS

    shared = json.dumps({**tools.pi_shared(), "verifyCommand": [python_exe(), *VERIFY_ARGS]},
                        ensure_ascii=False, indent=2)
    return text.replace(PI_SHARED, "/* factbank:shared */ " + shared)


# --- pending edits ---------------------------------------------------------------------------


@dataclass
class Change:
    path: Path
    old: str | None
    new: str | None  # None: delete the file

    def diff(self) -> str:
        if self.old == self.new:
            return ""
        a = (self.old or "").splitlines(keepends=True)
        b = (self.new or "").splitlines(keepends=True)
        label_a = str(self.path) if self.old is not None else "/dev/null"
        label_b = str(self.path) if self.new is not None else "/dev/null"
        out = "".join(difflib.unified_diff(a, b, label_a, label_b))
        if out and not out.endswith("\n"):
            out += "\n"
        return out


@dataclass
class Edits:
    """Reads each file once and stacks edits to it, so two edits of settings.json compose."""

    pending: dict[Path, str | None] = field(default_factory=dict)
    original: dict[Path, str | None] = field(default_factory=dict)

    def read(self, path: Path) -> str | None:
        if path in self.pending:
            return self.pending[path]
        if path not in self.original:
            try:
                # Bytes, decoded: read_text would turn CRLF into LF, and uninstall must give
                # back the very bytes the user had. Never through a link (safefs.read_own).
                data = safefs.read_own(path)
                self.original[path] = None if data is None else data.decode("utf-8")
            except safefs.UnsafePath as exc:
                raise InstallError(f"{exc}; nothing was changed") from None
            except UnicodeDecodeError as exc:
                raise InstallError(f"{path} is not UTF-8 text ({exc.reason}); nothing was "
                                   "changed") from None
            except OSError as exc:
                raise InstallError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return self.original[path]

    def write(self, path: Path, text: str | None) -> None:
        self.read(path)
        self.pending[path] = text

    def existed(self, path: Path) -> bool:
        self.read(path)
        return self.original[path] is not None

    def changes(self) -> list[Change]:
        return [Change(p, self.original[p], t) for p, t in self.pending.items()
                if self.original[p] != t]


def _json(edits: Edits, path: Path) -> tuple[dict, files.JsonStyle]:
    try:
        return files.load_json(edits.read(path))
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); fix it or move it away, "
                           "nothing was changed") from exc


# --- the manifest ----------------------------------------------------------------------------


def load_manifest(paths: Paths) -> dict:
    try:
        data = json.loads(safefs.read_own(paths.manifest) or b"")
    except (OSError, ValueError):
        return {"version": MANIFEST_VERSION, "harnesses": {}}
    data.setdefault("harnesses", {})
    return data


def _record(entry: dict, path: Path, *, created_file: bool = False,
            containers: list[files.Path_] = (), **lists: list[str]) -> None:
    """Merge what one install did to `path` into the harness's manifest entry. Never
    downgrades: a file created by the first install stays 'created' on later runs."""
    rec = entry.setdefault("files", {}).setdefault(str(path), {})
    if created_file:
        rec["created"] = True
    known = [tuple(c) for c in rec.get("containers", [])]
    for c in containers:
        if tuple(c) not in known:
            known.append(tuple(c))
    if known:
        rec["containers"] = [list(c) for c in known]
    for key, values in lists.items():
        merged = list(rec.get(key, []))
        merged += [v for v in values if v not in merged]
        if merged:
            rec[key] = merged


def _rec(entry: dict, path: Path) -> dict:
    return (entry.get("files") or {}).get(str(path), {})


def _changed(before: Any, after: Any) -> bool:
    return json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True)


def _write_json(edits: Edits, entry: dict, path: Path, before: dict, data: dict,
                style: files.JsonStyle, *, uninstall: bool = False) -> None:
    """Write only real changes (an already-installed file keeps its bytes); on uninstall a
    file the installer created and that is now empty is deleted.

    The first install that changes a file keeps its text as it was (`original` in the
    manifest, which is private); an uninstall that leaves the same data as that text writes
    the text back byte for byte, whatever its formatting (one-line lists, CRLF, tabs, 1e2,
    escapes). If something else changed the file in between, the data is written in the
    file's style instead."""
    rec = _rec(entry, path)
    if uninstall and rec.get("original") is not None:
        original = rec["original"]
        try:
            same = not _changed(files.load_json(original)[0], data)
        except ValueError:
            same = False
        if same:
            if edits.read(path) != original:
                edits.write(path, original)
            return
    if not _changed(before, data):
        return
    if uninstall and not data and rec.get("created"):
        edits.write(path, None)
        return
    if not uninstall:
        _remember_original(edits, entry, path)
    edits.write(path, files.dump_json(data, style))


def _remember_original(edits: Edits, entry: dict, path: Path) -> None:
    """Keep the text a file had before factbank first changed it (not when it already holds
    factbank's entries from an install without a manifest record: that is not the user's)."""
    original = edits.original.get(path)
    rec = entry.setdefault("files", {}).setdefault(str(path), {})
    if original is None or "original" in rec:
        return
    try:
        data = files.load_json(original)[0]
    except ValueError:
        return
    if files.our_handlers(data) or files.is_our_mcp((data.get("mcpServers") or {}).get(MCP_NAME)):
        return
    rec["original"] = original


def _copy(data: dict) -> dict:
    return json.loads(json.dumps(data))


# --- pieces shared by the harnesses -----------------------------------------------------------


def install_hooks(edits: Edits, entry: dict, path: Path, launcher: Launcher,
                  harness: str) -> None:
    data, style = _json(edits, path)
    before, created = _copy(data), []
    files.set_hooks(data, hook_handlers(launcher, harness), created, hook_matchers(harness))
    _record(entry, path, created_file=not edits.existed(path), containers=created)
    _write_json(edits, entry, path, before, data, style)


def uninstall_hooks(edits: Edits, entry: dict, path: Path) -> None:
    if edits.read(path) is None:
        return
    data, style = _json(edits, path)
    before = _copy(data)
    files.remove_hooks(data)
    files.prune_created(data, _rec(entry, path).get("containers", []))
    _write_json(edits, entry, path, before, data, style, uninstall=True)


def install_block(edits: Edits, entry: dict, path: Path) -> None:
    text = edits.read(path)
    new = files.put_block(text, asset_text("instructions.md"))
    _record(entry, path, created_file=text is None)
    if new != text:
        edits.write(path, new)


def uninstall_block(edits: Edits, entry: dict, path: Path) -> None:
    text = edits.read(path)
    if not files.has_block(text):
        return
    assert text is not None
    new: str | None = files.drop_block(text)
    if _rec(entry, path).get("created") and not (new or "").strip():
        new = None
    edits.write(path, new)


# --- Claude Code -------------------------------------------------------------------------------


def install_claude(edits: Edits, entry: dict, paths: Paths, launcher: Launcher,
                   notes: list[str]) -> None:
    settings = paths.claude_settings()
    install_hooks(edits, entry, settings, launcher, "claude")
    data, style = _json(edits, settings)
    before, created = _copy(data), []
    allow = files.ensure(data, ("permissions", "allow"), list, created)
    added = [t for t in CLAUDE_ALLOW if t not in allow]
    allow.extend(added)
    _record(entry, settings, containers=created, allow=added)
    _write_json(edits, entry, settings, before, data, style)

    cj = paths.claude_json
    data, style = _json(edits, cj)
    before, created = _copy(data), []
    servers = files.ensure(data, ("mcpServers",), dict, created)
    if MCP_NAME in servers and not files.is_our_mcp(servers[MCP_NAME]):
        notes.append(f"replaced a '{MCP_NAME}' MCP server in {cj} that was not factbank's "
                     "stdio server")
    servers[MCP_NAME] = {"type": "stdio", "command": launcher.python,
                         "args": mcp_args(MCP_AGENT["claude"]), "env": {}}
    _record(entry, cj, created_file=not edits.existed(cj), containers=created)
    _write_json(edits, entry, cj, before, data, style)

    install_block(edits, entry, paths.claude_dir / "CLAUDE.md")


def uninstall_claude(edits: Edits, entry: dict, paths: Paths) -> None:
    settings = paths.claude_settings()
    uninstall_hooks(edits, entry, settings)
    if edits.read(settings) is not None:
        data, style = _json(edits, settings)
        before = _copy(data)
        ours = set(_rec(entry, settings).get("allow", []))
        allow = (data.get("permissions") or {}).get("allow")
        if isinstance(allow, list) and ours:
            data["permissions"]["allow"] = [t for t in allow if t not in ours]
        files.prune_created(data, _rec(entry, settings).get("containers", []))
        _write_json(edits, entry, settings, before, data, style, uninstall=True)

    cj = paths.claude_json
    if edits.read(cj) is not None:
        data, style = _json(edits, cj)
        before = _copy(data)
        servers = data.get("mcpServers")
        if isinstance(servers, dict) and files.is_our_mcp(servers.get(MCP_NAME)):
            del servers[MCP_NAME]
        files.prune_created(data, _rec(entry, cj).get("containers", []))
        _write_json(edits, entry, cj, before, data, style, uninstall=True)

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
    _record(entry, path, created_file=not edits.existed(path))
    if current != server:
        try:
            text, created = toml.put(edits.read(path) or "", ("mcp_servers", MCP_NAME), server)
        except toml.TextEditFailed as exc:
            raise InstallError(f"cannot edit {path} safely ({exc}): its mcp_servers are "
                               "written as dotted keys or inline tables; nothing was changed"
                               ) from exc
        _record(entry, path, containers=created)
        edits.write(path, text)

    install_block(edits, entry, paths.codex_dir / "AGENTS.md")


def uninstall_codex(edits: Edits, entry: dict, paths: Paths) -> None:
    uninstall_hooks(edits, entry, paths.codex_hooks())
    path = paths.codex_config()
    old = edits.read(path)
    if old is not None:
        doc = _toml_doc(edits, path)
        rec = _rec(entry, path)
        text = old
        try:
            if files.is_our_mcp(toml.lookup(doc, ("mcp_servers", MCP_NAME))):
                text = toml.drop(text, ("mcp_servers", MCP_NAME))
            for key in rec.get("trusted", []):
                text = toml.drop(text, ("hooks", "state", key))
        except toml.TextEditFailed as exc:
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
    rec = _rec(entry, path)
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
    _record(entry, ext, created_file=text is None)
    _rec(entry, ext)["sha256"] = hashlib.sha256(new.encode("utf-8")).hexdigest()
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
    except safefs.UnsafePath as exc:
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
                    _record(entry, c.path, dirs=_missing_dirs(c.path))
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
    except safefs.UnsafePath as exc:
        raise InstallError(str(exc)) from None
    except OSError as exc:  # e.g. its folder is a dangling link
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from None


def _unchanged(c: Change) -> None:
    """The file still holds what the plan read (`c.old`): install and uninstall change only
    bytes they know, never a file edited (or replaced by a link) since."""
    try:
        data = safefs.read_own(c.path)
    except safefs.UnsafePath as exc:
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
