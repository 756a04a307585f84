"""What every harness's installer shares: where things live (`Paths`), what the hooks run
(`Launcher`, `hook_command`), the pending edits (`Edits`, `Change`) computed before anything
is written, the manifest of what was created, and the hook, MCP and instruction-block edits
that several harnesses make alike. The harnesses' own installers (`harnesses`: Claude Code,
Codex, Pi; `copilot`, `gemini`, `opencode`) stand on it and never on each other."""

from __future__ import annotations

import difflib
import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from factbank_client import safefs, tools
from factbank_client.errors import InstallError, UnsafePath
from factbank_client.install import files as files

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
                      "list_categories", "handoff", "facts_to_enrich", "enrich", "review_queue",
                      "decide_candidate", "queue_correction"))

CODEX_ENV_VARS = ("FACTBANK_CONFIG", "FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN",
                  "FACTBANK_TEAM_TOKEN")

PI_EXTENSION = "factbank.ts"

PI_MARKER = "factbank-extension"

# Where the extension's SHARED constant gets its value (see pi_extension_text).
PI_SHARED = "/* factbank:shared */ null as unknown as Shared"

MANIFEST_VERSION = 1


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


CODE_ARGS = ("-m", "factbank_client.cli.main", "code")
# A symbol source's check and fingerprint for Pi's add (code/check.py).
ANCHOR_ARGS = ("-m", "factbank_client.code.check")


def pi_extension_text() -> str:
    """The Pi extension as installed: the asset with `tools.pi_shared()` (the tool texts and
    the wire constants) written in as a JSON literal where SHARED is declared."""
    text = asset_text("pi", PI_EXTENSION)
    if text.count(PI_SHARED) != 1:
        raise InstallError(f"the packaged {PI_EXTENSION} lacks its SHARED declaration")
    # The background verify at session start, as the hooks run it: this
    # interpreter, with site (the CLI needs httpx).
    from factbank_client.hook.verify import VERIFY_ARGS

    # The code tools run `factbank code ...` with the same interpreter: the graph is local,
    # as in the stdio MCP server.
    shared = json.dumps({**tools.pi_shared(), "verifyCommand": [python_exe(), *VERIFY_ARGS],
                         "codeCommand": [python_exe(), *CODE_ARGS],
                         "anchorCommand": [python_exe(), *ANCHOR_ARGS]},
                        ensure_ascii=False, indent=2)
    return text.replace(PI_SHARED, "/* factbank:shared */ " + shared)


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
            except UnsafePath as exc:
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


def json_of(edits: Edits, path: Path) -> tuple[dict, files.JsonStyle]:
    try:
        return files.load_json(edits.read(path))
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); fix it or move it away, "
                           "nothing was changed") from exc


def load_manifest(paths: Paths) -> dict:
    try:
        data = json.loads(safefs.read_own(paths.manifest) or b"")
    except (OSError, ValueError):
        return {"version": MANIFEST_VERSION, "harnesses": {}}
    data.setdefault("harnesses", {})
    return data


def record_file(entry: dict, path: Path, *, created_file: bool = False,
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


def file_record(entry: dict, path: Path) -> dict:
    return (entry.get("files") or {}).get(str(path), {})


def _changed(before: Any, after: Any) -> bool:
    return json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True)


def write_json(edits: Edits, entry: dict, path: Path, before: dict, data: dict,
                style: files.JsonStyle, *, uninstall: bool = False) -> None:
    """Write only real changes (an already-installed file keeps its bytes); on uninstall a
    file the installer created and that is now empty is deleted.

    The first install that changes a file keeps its text as it was (`original` in the
    manifest, which is private); an uninstall that leaves the same data as that text writes
    the text back byte for byte, whatever its formatting (one-line lists, CRLF, tabs, 1e2,
    escapes). If something else changed the file in between, the data is written in the
    file's style instead."""
    rec = file_record(entry, path)
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


def deep_copy(data: dict) -> dict:
    return json.loads(json.dumps(data))


def install_hooks(edits: Edits, entry: dict, path: Path, launcher: Launcher,
                  harness: str) -> None:
    data, style = json_of(edits, path)
    before, created = deep_copy(data), []
    files.set_hooks(data, hook_handlers(launcher, harness), created, hook_matchers(harness))
    record_file(entry, path, created_file=not edits.existed(path), containers=created)
    write_json(edits, entry, path, before, data, style)


def uninstall_hooks(edits: Edits, entry: dict, path: Path) -> None:
    if edits.read(path) is None:
        return
    data, style = json_of(edits, path)
    before = deep_copy(data)
    files.remove_hooks(data)
    files.prune_created(data, file_record(entry, path).get("containers", []))
    write_json(edits, entry, path, before, data, style, uninstall=True)


def install_block(edits: Edits, entry: dict, path: Path) -> None:
    text = edits.read(path)
    new = files.put_block(text, asset_text("instructions.md"))
    record_file(entry, path, created_file=text is None)
    if new != text:
        edits.write(path, new)


def uninstall_block(edits: Edits, entry: dict, path: Path) -> None:
    text = edits.read(path)
    if not files.has_block(text):
        return
    assert text is not None
    new: str | None = files.drop_block(text)
    if file_record(entry, path).get("created") and not (new or "").strip():
        new = None
    edits.write(path, new)
