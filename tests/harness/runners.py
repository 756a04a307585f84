"""Run the real Claude Code, Codex and Pi binaries against a :class:`FakeModel`, offline.

Each harness has exactly one place that writes its model/provider settings into a throwaway
``HOME`` (``configure_*_home``) and one place that builds its environment (``*_env``). Both
*merge* into whatever the caller already put in that HOME (e.g. the factbank installer's hooks,
MCP servers or Pi extension), so installer tests can run the installer first and the harness
second. ``run_*`` call ``configure_*_home`` themselves; calling it twice is harmless.

The process runs with an ``env -i``-style environment (PATH, HOME, TERM=dumb, LANG plus the
harness's own variables that point it at the fake server and switch off telemetry, update
checks and plugin look-ups), stdin from /dev/null, in its own process group, and a timeout
that kills the whole group (MCP servers and hooks included).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from factbank_client.install import codex_trust

from .fake_model import MODEL_ID, FakeModel
from .npm import Harnesses, ensure_harnesses

DEFAULT_TIMEOUT = 120.0
STUB_PROVIDER = "stub"


@dataclass
class RunResult:
    """Unpacks as ``(returncode, stdout, stderr)``; also carries argv and wall time."""

    returncode: int
    stdout: str
    stderr: str
    argv: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __iter__(self) -> Iterator[Any]:
        return iter((self.returncode, self.stdout, self.stderr))

    def describe(self) -> str:
        return (
            f"argv={self.argv}\nexit={self.returncode} in {self.seconds:.1f}s\n"
            f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


class HarnessTimeout(AssertionError):
    pass


# -- generic helpers ----------------------------------------------------------------------------
def read_json(path: Path) -> dict[str, Any]:
    if not path.exists() or not path.read_text().strip():
        return {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def add_command_hook(
    hooks_file: Path,
    event: str,
    command: str,
    *,
    matcher: str | None = None,
    timeout: int | None = None,
) -> None:
    """Append a command hook to a Claude ``settings.json`` or Codex ``hooks.json`` (same shape:
    ``{"hooks": {Event: [{"matcher"?, "hooks": [{"type": "command", "command"}]}]}}``)."""
    data = read_json(hooks_file)
    handler: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        handler["timeout"] = timeout
    group: dict[str, Any] = {"hooks": [handler]}
    if matcher is not None:
        group["matcher"] = matcher
    data.setdefault("hooks", {}).setdefault(event, []).append(group)
    write_json(hooks_file, data)


def base_env(
    home: Path, harnesses: Harnesses, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = {
        "PATH": harnesses.path_env(),
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
    }
    env.update(extra or {})
    return env


def run_process(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float
) -> RunResult:
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise HarnessTimeout(
            f"{argv[0]} did not finish within {timeout:.0f}s\n--- stdout ---\n{out[-3000:]}"
            f"\n--- stderr ---\n{err[-3000:]}"
        ) from None
    finally:
        # Reap anything the harness left behind in its group (MCP servers, hooks).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    return RunResult(proc.returncode, out, err, list(argv), time.monotonic() - start)


# -- Claude Code --------------------------------------------------------------------------------
def claude_settings_path(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def configure_claude_home(home: Path, fake: FakeModel) -> Path:
    """Claude Code takes its model endpoint from the environment (:func:`claude_env`); nothing
    needs writing. Creates ``~/.claude/`` and returns the settings.json path (left untouched
    if it exists; no onboarding file is needed)."""
    del fake
    path = claude_settings_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def add_claude_mcp_server(
    home: Path,
    name: str,
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    allow_tools: Sequence[str] = (),
) -> None:
    """Register a user-scope stdio MCP server in ``~/.claude.json`` (``mcpServers``, merged)
    and allow ``allow_tools`` (e.g. ``mcp__NAME__TOOL``) in settings.json ``permissions.allow``
    (``claude -p`` denies tools that would need a permission prompt)."""
    path = home / ".claude.json"
    data = read_json(path)
    server: dict[str, Any] = {"type": "stdio", "command": command, "args": list(args)}
    if env:
        server["env"] = dict(env)
    data.setdefault("mcpServers", {})[name] = server
    write_json(path, data)
    if allow_tools:
        settings = claude_settings_path(home)
        conf = read_json(settings)
        allow = conf.setdefault("permissions", {}).setdefault("allow", [])
        allow.extend(t for t in allow_tools if t not in allow)
        write_json(settings, conf)


def claude_env(home: Path, fake: FakeModel, harnesses: Harnesses) -> dict[str, str]:
    return base_env(
        home,
        harnesses,
        {
            "ANTHROPIC_BASE_URL": fake.url,
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
    )


def run_claude(
    home: Path,
    cwd: Path,
    prompt: str,
    fake: FakeModel,
    *,
    harnesses: Harnesses | None = None,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> RunResult:
    """``claude -p PROMPT --output-format json`` (stdout is one JSON result object)."""
    h = harnesses or ensure_harnesses()
    configure_claude_home(home, fake)
    env = {**claude_env(home, fake, h), **(extra_env or {})}
    argv = [str(h.claude), "-p", prompt, "--output-format", "json", *extra_args]
    return run_process(argv, cwd=cwd, env=env, timeout=timeout)


# -- Codex --------------------------------------------------------------------------------------
def codex_config_path(home: Path) -> Path:
    return home / ".codex" / "config.toml"


def codex_hooks_path(home: Path) -> Path:
    return home / ".codex" / "hooks.json"


def _toml_table(doc: Any, key: str) -> Any:
    if key not in doc:
        doc[key] = tomlkit.table()
    return doc[key]


def configure_codex_home(home: Path, fake: FakeModel) -> Path:
    """Merge the stub provider into ``~/.codex/config.toml`` (keeps every other key, comments
    and formatting: tomlkit round-trip). Returns the config path."""
    path = codex_config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    doc["model"] = MODEL_ID
    doc["model_provider"] = STUB_PROVIDER
    doc["check_for_update_on_startup"] = False
    providers = _toml_table(doc, "model_providers")
    stub = tomlkit.table()
    stub["name"] = "Stub"
    stub["base_url"] = fake.base_url
    stub["wire_api"] = "responses"
    stub["env_key"] = "STUB_API_KEY"
    providers[STUB_PROVIDER] = stub
    _toml_table(doc, "analytics")["enabled"] = False
    features = _toml_table(doc, "features")
    features["hooks"] = True
    features["plugins"] = False  # stops start-up look-ups of outside hosts
    path.write_text(tomlkit.dumps(doc))
    return path


def add_codex_mcp_server(
    home: Path,
    name: str,
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> None:
    """Add ``[mcp_servers.NAME]`` to config.toml (merge). ``options`` go in verbatim, e.g.
    ``default_tools_approval_mode="approve"`` (else ``codex exec`` refuses the call: approval
    policy is never) and ``required=True`` (else a server slower than ~1.2 s to answer
    ``initialize`` misses the first turn). Unknown keys make Codex reject the config."""
    path = codex_config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    servers = _toml_table(doc, "mcp_servers")
    server = tomlkit.table()
    server["command"] = command
    server["args"] = list(args)
    if env:
        server["env"] = dict(env)
    for key, value in options.items():
        server[key] = value
    servers[name] = server
    path.write_text(tomlkit.dumps(doc))


def codex_env(home: Path, fake: FakeModel, harnesses: Harnesses) -> dict[str, str]:
    del fake
    return base_env(home, harnesses, {"STUB_API_KEY": "dummy"})


def run_codex(
    home: Path,
    cwd: Path,
    prompt: str,
    fake: FakeModel,
    *,
    harnesses: Harnesses | None = None,
    bypass_hook_trust: bool = True,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> RunResult:
    """``codex exec --skip-git-repo-check [--dangerously-bypass-hook-trust] PROMPT``.

    Without the bypass flag Codex runs only hooks whose hash is trusted in config.toml
    (``[hooks.state."<key>"] trusted_hash``); untrusted ones are skipped silently, exit 0."""
    h = harnesses or ensure_harnesses()
    configure_codex_home(home, fake)
    env = {**codex_env(home, fake, h), **(extra_env or {})}
    argv = [str(h.codex), "exec", "--skip-git-repo-check"]
    if bypass_hook_trust:
        argv.append("--dangerously-bypass-hook-trust")
    argv += [*extra_args, prompt]
    return run_process(argv, cwd=cwd, env=env, timeout=timeout)


# -- Pi -----------------------------------------------------------------------------------------
def pi_agent_dir(home: Path) -> Path:
    return home / ".pi" / "agent"


def pi_extensions_dir(home: Path) -> Path:
    return pi_agent_dir(home) / "extensions"


def configure_pi_home(home: Path, fake: FakeModel) -> Path:
    """Merge the ``stub`` provider into ``~/.pi/agent/models.json`` (other providers kept)."""
    path = pi_agent_dir(home) / "models.json"
    data = read_json(path)
    data.setdefault("providers", {})[STUB_PROVIDER] = {
        "baseUrl": fake.base_url,
        "api": "openai-completions",
        "apiKey": "dummy",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [
            {
                "id": MODEL_ID,
                "reasoning": False,
                "input": ["text"],
                "contextWindow": 128000,
                "maxTokens": 4096,
            }
        ],
    }
    write_json(path, data)
    return path


def pi_env(home: Path, fake: FakeModel, harnesses: Harnesses) -> dict[str, str]:
    del fake
    return base_env(home, harnesses, {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"})


def run_pi(
    home: Path,
    cwd: Path,
    prompt: str,
    fake: FakeModel,
    *,
    harnesses: Harnesses | None = None,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> RunResult:
    """``pi --offline --provider stub --model stub-model -p PROMPT``."""
    h = harnesses or ensure_harnesses()
    configure_pi_home(home, fake)
    env = {**pi_env(home, fake, h), **(extra_env or {})}
    argv = [
        str(h.pi),
        "--offline",
        "--provider",
        STUB_PROVIDER,
        "--model",
        MODEL_ID,
        *extra_args,
        "-p",
        prompt,
    ]
    return run_process(argv, cwd=cwd, env=env, timeout=timeout)


def codex_hooks_inventory(
    home: Path,
    cwd: Path,
    fake: FakeModel,
    *,
    harnesses: Harnesses | None = None,
    timeout: float = 30.0,
) -> list[dict[str, Any]]:
    """Ask the real Codex (``codex app-server``, JSON-RPC over stdio, method ``hooks/list``)
    which hooks it discovered for ``cwd``: each has ``key`` (``<hooks.json path>:<event
    snake_case>:<group index>:<handler index>``), ``currentHash`` (``sha256:...``),
    ``trustStatus`` (``untrusted``/``trusted``/...), ``timeoutSec``, ``command``, ...
    This is the same call Codex's own ``/hooks`` screen makes."""
    h = harnesses or ensure_harnesses()
    configure_codex_home(home, fake)
    return codex_trust.hooks_list(str(h.codex), cwd, codex_env(home, fake, h), timeout)


def trust_codex_hooks(home: Path, hooks: Sequence[Mapping[str, Any]]) -> None:
    """Record ``hooks`` (from :func:`codex_hooks_inventory`) as trusted, exactly as Codex's
    ``/hooks`` screen stores it: ``[hooks.state."<key>"] trusted_hash = "<currentHash>"`` in
    config.toml. A hook whose command/event/matcher/timeout later changes gets a new hash and
    is untrusted again (skipped silently) until re-trusted."""
    path = codex_config_path(home)
    doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    hooks_table = _toml_table(doc, "hooks")
    state = _toml_table(hooks_table, "state")
    for hook in hooks:
        entry = tomlkit.table()
        entry["trusted_hash"] = hook["currentHash"]
        state[hook["key"]] = entry
    path.write_text(tomlkit.dumps(doc))
