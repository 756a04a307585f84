"""Install the three real agent harnesses from the npm registry once, into a cache, and reuse it.

``ensure_harnesses()`` returns the binaries' paths or raises :class:`HarnessUnavailable` (the
conftest turns that into a skip with the reason). The cache dir is ``FACTBANK_HARNESS_DIR`` or
``~/.cache/factbank/harnesses``; an ``fcntl`` lock on ``<dir>/.lock`` keeps two test processes
from installing at once. The versions are pinned to the ones seen working (see README.md);
``FACTBANK_HARNESS_PACKAGES`` (space-separated npm specs) overrides them.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PACKAGES: tuple[str, ...] = (
    "@anthropic-ai/claude-code@2.1.197",
    "@openai/codex@0.171.0",
    "@mariozechner/pi-coding-agent@0.73.1",
)
BINARIES = {"claude": "claude", "codex": "codex", "pi": "pi"}
# The next four, in their own directory (``<harness dir>-next``) so neither set's
# install invalidates the other's cache. Copilot unpacks ~235 MB more into the run's HOME on
# its first start (``runners_next`` keeps one shared copy).
NEXT_PACKAGES: tuple[str, ...] = (
    "@google/gemini-cli@0.61.0",
    "@qwen-code/qwen-code@0.15.10",
    "opencode-ai@1.18.33",
    "@github/copilot@1.0.102",
)
NEXT_BINARIES = {"gemini": "gemini", "qwen": "qwen", "opencode": "opencode",
                 "copilot": "copilot"}
INSTALL_TIMEOUT = 900.0
STAMP = ".factbank-harness-stamp.json"


class HarnessUnavailable(RuntimeError):
    """npm, node or the registry is missing: the harness tests must be skipped, not failed."""


@dataclass(frozen=True)
class Harnesses:
    root: Path
    claude: Path
    codex: Path
    pi: Path
    node_bin_dir: Path  # the directory holding the ``node`` the harnesses run on
    packages: tuple[str, ...]

    def path_env(self) -> str:
        """A minimal ``PATH``: node (pi and codex's launcher are node scripts), then system."""
        dirs = [str(self.node_bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]
        return os.pathsep.join(dict.fromkeys(dirs))


def harness_dir() -> Path:
    env = os.environ.get("FACTBANK_HARNESS_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "factbank" / "harnesses"


def wanted_packages() -> tuple[str, ...]:
    env = os.environ.get("FACTBANK_HARNESS_PACKAGES", "").split()
    return tuple(env) if env else PACKAGES


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _binaries(root: Path, binaries: dict[str, str] | None = None) -> dict[str, Path]:
    bin_dir = root / "node_modules" / ".bin"
    return {key: bin_dir / name for key, name in (binaries or BINARIES).items()}


def _installed(root: Path, packages: tuple[str, ...],
               binaries: dict[str, str] | None = None) -> bool:
    try:
        stamp = json.loads((root / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("packages") == list(packages) and all(
        p.exists() for p in _binaries(root, binaries).values()
    )


def _install(root: Path, packages: tuple[str, ...], npm: str,
             binaries: dict[str, str] | None = None) -> None:
    (root / STAMP).unlink(missing_ok=True)
    pkg_json = root / "package.json"
    if not pkg_json.exists():
        pkg_json.write_text(json.dumps({"name": "factbank-harnesses", "private": True}) + "\n")
    env = {
        **os.environ,
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
        # Fail fast (and skip) when the registry is unreachable instead of backing off ~3 min.
        "npm_config_fetch_retries": "2",
        "npm_config_fetch_retry_mintimeout": "2000",
        "npm_config_fetch_retry_maxtimeout": "10000",
    }
    cmd = [npm, "install", "--no-audit", "--no-fund", "--save-exact", *packages]
    try:
        proc = subprocess.run(
            cmd,
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise HarnessUnavailable(f"npm install timed out after {INSTALL_TIMEOUT:.0f}s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-1500:]
        raise HarnessUnavailable(f"npm install failed (exit {proc.returncode}): {tail}")
    missing = [str(p) for p in _binaries(root, binaries).values() if not p.exists()]
    if missing:
        raise HarnessUnavailable(f"npm install finished but binaries are missing: {missing}")
    (root / STAMP).write_text(json.dumps({"packages": list(packages)}, indent=1) + "\n")


def ensure_harnesses(root: Path | None = None) -> Harnesses:
    """Install (once) and return the harness binaries. Raises :class:`HarnessUnavailable`."""
    root = (root or harness_dir()).resolve()
    packages = wanted_packages()
    node = shutil.which("node")
    if node is None:
        raise HarnessUnavailable("node is not on PATH (the harnesses need Node.js >= 20)")
    with _locked(root):
        if not _installed(root, packages):
            npm = shutil.which("npm")
            if npm is None:
                raise HarnessUnavailable("npm is not on PATH; cannot install the harnesses")
            _install(root, packages, npm)
    bins = _binaries(root)
    return Harnesses(
        root=root,
        claude=bins["claude"],
        codex=bins["codex"],
        pi=bins["pi"],
        node_bin_dir=Path(node).parent,
        packages=packages,
    )


@dataclass(frozen=True)
class NextHarnesses:
    root: Path
    bins: dict[str, Path]
    node_bin_dir: Path

    def path_env(self) -> str:
        dirs = [str(self.node_bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]
        return os.pathsep.join(dict.fromkeys(dirs))


def ensure_next_harnesses(root: Path | None = None) -> NextHarnesses:
    """Gemini CLI, Qwen Code, OpenCode and Copilot CLI, installed once (as
    :func:`ensure_harnesses`). Raises :class:`HarnessUnavailable`."""
    root = (root or harness_dir().with_name(harness_dir().name + "-next")).resolve()
    node = shutil.which("node")
    if node is None:
        raise HarnessUnavailable("node is not on PATH (the harnesses need Node.js >= 20)")
    with _locked(root):
        if not _installed(root, NEXT_PACKAGES, NEXT_BINARIES):
            npm = shutil.which("npm")
            if npm is None:
                raise HarnessUnavailable("npm is not on PATH; cannot install the harnesses")
            _install(root, NEXT_PACKAGES, npm, NEXT_BINARIES)
    return NextHarnesses(root, _binaries(root, NEXT_BINARIES), Path(node).parent)
