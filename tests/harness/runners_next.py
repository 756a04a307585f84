"""Run the real Gemini CLI, Qwen Code, OpenCode and Copilot CLI against a :class:`FakeModel`,
offline (the settings that keep each on loopback, checked with strace: docs/harnesses.md).

As in runners.py, ``configure_*_home`` *merges* the model and offline settings into a HOME
the factbank installer may already have written, and ``run_*`` runs the binary in an
``env -i``-style environment with a timeout that kills its process group.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .fake_model import MODEL_ID, FakeModel
from .npm import NextHarnesses
from .runners import DEFAULT_TIMEOUT, RunResult, read_json, run_process, write_json

GEMINI_MODEL = "gemini-2.5-flash"


def _env(home: Path, h: NextHarnesses, extra: dict[str, str]) -> dict[str, str]:
    return {"PATH": h.path_env(), "HOME": str(home), "TERM": "dumb", "LANG": "C.UTF-8",
            **extra}


def _merge(path: Path, values: dict) -> None:
    data = read_json(path)
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    write_json(path, data)


# -- Gemini CLI ---------------------------------------------------------------------------------
def configure_gemini_home(home: Path) -> None:
    _merge(home / ".gemini" / "settings.json", {
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "ide": {"enabled": False},
        # gemini-api-key: the base-URL variable applies to it ("gateway" exits 41).
        "security": {"auth": {"selectedType": "gemini-api-key"},
                     "folderTrust": {"enabled": False}}})


def run_gemini(home: Path, cwd: Path, prompt: str, fake: FakeModel, *, harnesses: NextHarnesses,
               extra_args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    configure_gemini_home(home)
    env = _env(home, harnesses, {"GOOGLE_GEMINI_BASE_URL": fake.url, "GEMINI_API_KEY": "dummy",
                                 "GEMINI_CLI_NO_RELAUNCH": "true",
                                 "GEMINI_TELEMETRY_ENABLED": "false"})
    argv = [str(harnesses.bins["gemini"]), "-p", prompt, "-m", GEMINI_MODEL, "--yolo",
            "-o", "json", *extra_args]
    return run_process(argv, cwd=cwd, env=env, timeout=timeout)


# -- Qwen Code ----------------------------------------------------------------------------------
def configure_qwen_home(home: Path) -> None:
    _merge(home / ".qwen" / "settings.json", {
        "general": {"enableAutoUpdate": False}, "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False}, "ide": {"enabled": False},
        "ui": {"enableUserFeedback": False, "enableFollowupSuggestions": False},
        "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
        "model": {"name": MODEL_ID},
        # Qwen's own memory store would make a second, extracting request per run.
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False}})


def run_qwen(home: Path, cwd: Path, prompt: str, fake: FakeModel, *, harnesses: NextHarnesses,
             extra_args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    configure_qwen_home(home)
    env = _env(home, harnesses, {"OPENAI_API_KEY": "dummy", "OPENAI_BASE_URL": fake.base_url,
                                 "OPENAI_MODEL": MODEL_ID, "QWEN_CODE_NO_RELAUNCH": "true",
                                 "QWEN_CODE_DISABLE_PRECONNECT": "1",
                                 "QWEN_TELEMETRY_ENABLED": "false"})
    argv = [str(harnesses.bins["qwen"]), "-p", prompt, "--yolo", *extra_args]
    return run_process(argv, cwd=cwd, env=env, timeout=timeout)


# -- Copilot CLI --------------------------------------------------------------------------------
def configure_copilot_home(home: Path, harnesses: NextHarnesses) -> None:
    _merge(home / ".copilot" / "settings.json", {"autoUpdate": False, "banner": "never"})
    # Its first start unpacks ~235 MB into ~/.cache/copilot/pkg: one shared copy for all runs.
    shared = harnesses.root / "copilot-cache"
    shared.mkdir(exist_ok=True)
    link = home / ".cache" / "copilot"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shared, target_is_directory=True)


def run_copilot(home: Path, cwd: Path, prompt: str, fake: FakeModel, *,
                harnesses: NextHarnesses, extra_args: Sequence[str] = (),
                timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    configure_copilot_home(home, harnesses)
    env = _env(home, harnesses, {"COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                                 "COPILOT_PROVIDER_BASE_URL": fake.base_url,
                                 "COPILOT_PROVIDER_API_KEY": "dummy",
                                 "COPILOT_MODEL": MODEL_ID})
    argv = [str(harnesses.bins["copilot"]), "-p", prompt, "--no-auto-update",
            "--allow-all-tools", *extra_args]
    return run_process(argv, cwd=cwd, env=env, timeout=timeout)


# -- OpenCode -----------------------------------------------------------------------------------
def seed_opencode_dir(path: Path) -> None:
    """OpenCode runs `npm install @opencode-ai/plugin` in the background in every config
    directory that lacks node_modules and a package-lock naming it (reaching the registry
    on port 443 even with every OPENCODE_DISABLE_* set): seed both first."""
    (path / "node_modules").mkdir(parents=True, exist_ok=True)
    lock = path / "package-lock.json"
    if not lock.exists():
        lock.write_text('{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}\n')


def configure_opencode_home(home: Path, fake: FakeModel) -> None:
    root = home / ".config" / "opencode"
    seed_opencode_dir(root)
    _merge(root / "opencode.json", {
        "autoupdate": False, "share": "disabled", "model": f"stub/{MODEL_ID}",
        "small_model": f"stub/{MODEL_ID}",
        "provider": {"stub": {"npm": "@ai-sdk/openai-compatible", "name": "Stub",
                              "options": {"baseURL": fake.base_url, "apiKey": "dummy"},
                              "models": {MODEL_ID: {"name": "Stub model", "tool_call": True}}}}})


def run_opencode(home: Path, cwd: Path, prompt: str, fake: FakeModel, *,
                 harnesses: NextHarnesses, extra_args: Sequence[str] = (),
                 timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    configure_opencode_home(home, fake)
    env = _env(home, harnesses, {
        "OPENCODE_DISABLE_AUTOUPDATE": "true", "OPENCODE_DISABLE_MODELS_FETCH": "true",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true", "OPENCODE_DISABLE_LSP_DOWNLOAD": "true",
        "OPENCODE_DISABLE_SHARE": "true", "OPENCODE_DISABLE_CLAUDE_CODE": "true"})
    argv = [str(harnesses.bins["opencode"]), "run", *extra_args, prompt]
    return run_process(argv, cwd=cwd, env=env, timeout=timeout)


RUNNERS = {"gemini": run_gemini, "qwen": run_qwen, "copilot": run_copilot,
           "opencode": run_opencode}
