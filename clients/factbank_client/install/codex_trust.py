"""`factbank install codex --trust`: mark factbank's Codex hooks as trusted, the way Codex does.

Codex runs a command hook only if `config.toml` holds
`[hooks.state."<hooks.json>:<event>:<group>:<handler>"] trusted_hash = "sha256:..."` matching
the handler's current hash; an untrusted hook is skipped silently. The hash is Codex's own
(internal) computation, so rather than re-implementing it we ask Codex: `codex app-server`
(JSON-RPC over stdio) `hooks/list` returns every hook's key, hash and trust status, the same
call its `/hooks` screen makes. Only hooks whose command runs factbank's hook are trusted, and
the keys are recorded in the install manifest so uninstall removes them again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from factbank_client import safefs
from factbank_client.errors import InstallError, TextEditFailed, UnsafePath
from factbank_client.install import common
from factbank_client.install import harnesses as installer
from factbank_client.install import toml_table as toml
from factbank_client.install.files import is_our_handler
from factbank_client.settings import settings


class TrustError(InstallError):
    pass


def find_codex(explicit: str | None = None) -> str:
    found = explicit or settings.codex_bin or shutil.which("codex")
    if not found:
        raise TrustError("`codex` is not on PATH: trust factbank's hooks in Codex itself "
                         "(type /hooks and trust the three factbank hooks), or pass --codex-bin")
    return found


def list_hooks(codex: str, paths: common.Paths, cwd: Path, timeout: float = 30.0
               ) -> list[dict[str, Any]]:
    """Every hook Codex discovers for `cwd`, as `hooks/list` reports it."""
    env = {**os.environ, "HOME": str(paths.home)}
    if paths.codex_dir != paths.home / ".codex":
        env["CODEX_HOME"] = str(paths.codex_dir)
    return hooks_list(codex, cwd, env, timeout)


def hooks_list(codex: str, cwd: Path, env: dict[str, str], timeout: float = 30.0
               ) -> list[dict[str, Any]]:
    """`codex app-server` `hooks/list` for `cwd` under `env`: each hook's `key`
    (`<hooks.json>:<event>:<group>:<handler>`), `currentHash`, `trustStatus`, `command`...
    (the harness tests call this too, against the real Codex)."""
    proc = subprocess.Popen([codex, "app-server"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"clientInfo": {"name": "factbank-install", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    result = None
    deadline = time.monotonic() + timeout
    try:
        for req in requests:
            proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("id") == 2:
                if "error" in msg:
                    raise TrustError(f"codex hooks/list failed: {msg['error']}")
                result = msg["result"]
                break
    finally:
        try:  # the whole group: app-server may have started helpers of its own
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
    if result is None:
        raise TrustError("codex app-server did not answer hooks/list")
    return [h for entry in result.get("data", []) for h in entry.get("hooks", [])]


def ours(hooks: list[dict[str, Any]], paths: common.Paths) -> list[dict[str, Any]]:
    hooks_file = str(paths.codex_hooks())
    return [h for h in hooks if is_our_handler({"command": h.get("command", "")})
            and str(h.get("key", "")).startswith(hooks_file + ":")]


def trust(paths: common.Paths, codex: str | None = None) -> list[str]:
    """Trust factbank's installed Codex hooks; returns the keys written."""
    found = ours(list_hooks(find_codex(codex), paths, paths.home), paths)
    if not found:
        raise TrustError("Codex does not list factbank's hooks; run `factbank install codex` "
                         "first")
    path = paths.codex_config()
    try:
        text = (safefs.read_own(path) or b"").decode("utf-8")
    except (UnsafePath, UnicodeDecodeError) as exc:
        raise TrustError(f"cannot edit {path} safely ({exc})") from None
    created: list[tuple[str, ...]] = []
    keys = []
    for hook in found:
        try:
            text, made = toml.put(text, ("hooks", "state", hook["key"]),
                                  {"trusted_hash": hook["currentHash"]})
        except TextEditFailed as exc:
            raise TrustError(f"cannot edit {path} safely ({exc}); trust the hooks in Codex "
                             "(/hooks) instead") from exc
        created += [c for c in made if c not in created]
        keys.append(hook["key"])
    installer.write_text(path, text)
    manifest = common.load_manifest(paths)
    rec = manifest["harnesses"].setdefault("codex", {})
    common.record_file(rec, path, containers=created, trusted=keys)
    installer.write_text(paths.manifest, json.dumps(manifest, indent=2) + "\n")
    return keys


def status(paths: common.Paths, codex: str | None = None) -> dict[str, str]:
    """{event: trustStatus} of factbank's Codex hooks (for the install summary)."""
    found = ours(list_hooks(find_codex(codex), paths, paths.home), paths)
    return {str(h.get("eventName")): str(h.get("trustStatus")) for h in found}
