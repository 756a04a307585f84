"""Whether a dispatched run will have factbank's hooks active, said in its log and record.

Dispatch runs the harness with its normal config, so the hooks `factbank install` wrote load
the shared context. When they would not (not installed for that harness; for Codex, installed
but not trusted, which Codex skips silently with exit 0, see tests/harness/README.md), the run
still goes on, and its log says so once with the command that fixes it: a run without memory
must not look like one with it (docs/principles.md#silent-failures-are-the-worst).

* Claude Code: a factbank handler in `settings.json` (`$CLAUDE_CONFIG_DIR` or `~/.claude`).
* Codex: factbank's handlers in `hooks.json`, and their trust as Codex itself reports it
  (`codex app-server` `hooks/list`, as `factbank install codex --trust` asks it; ~1 s,
  in the supervisor's thread, never before the harness starts). With
  `--dangerously-bypass-hook-trust` on the command line, trust is not needed.
* Pi: the extension file in `~/.pi/agent/extensions/`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path


def _claude_ok(settings: Path) -> bool:
    from factbank_client.install.files import is_our_handler

    try:
        data = json.loads(settings.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    hooks = data.get("hooks") if isinstance(data, dict) else None
    return isinstance(hooks, dict) and any(
        is_our_handler(h) for groups in hooks.values() if isinstance(groups, list)
        for g in groups if isinstance(g, dict) for h in g.get("hooks") or [])


def check(agent: str, env: Mapping[str, str], cwd: str, argv: Sequence[str]) -> tuple[str, str]:
    """(`active` | `not installed` | `untrusted` | `unknown`, a sentence for the log)."""
    from factbank_client.install.common import Paths

    paths = Paths.from_env(env)
    if agent == "claude":
        if _claude_ok(paths.claude_settings()):
            return "active", "factbank's hooks are installed for Claude Code"
        return "not installed", ("factbank's hooks are not installed for Claude Code, so no "
                                 "shared context: run `factbank install claude`")
    if agent == "pi":
        if paths.pi_extension().exists():
            return "active", "factbank's extension is installed for Pi"
        return "not installed", ("factbank's extension is not installed for Pi, so no shared "
                                 "context: run `factbank install pi`")
    from factbank_client.install import codex_trust
    from factbank_client.install.files import is_our_handler

    try:
        data = json.loads(paths.codex_hooks().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if not (isinstance(hooks, dict) and any(
            is_our_handler(h) for groups in hooks.values() if isinstance(groups, list)
            for g in groups if isinstance(g, dict) for h in g.get("hooks") or [])):
        return "not installed", ("factbank's hooks are not installed for Codex, so no shared "
                                 "context: run `factbank install codex --trust`")
    if "--dangerously-bypass-hook-trust" in argv:
        return "active", "factbank's hooks are installed for Codex (hook trust bypassed)"
    try:
        listed = codex_trust.hooks_list(str(argv[0]), Path(cwd), dict(env), timeout=20.0)
    except Exception as exc:  # a Codex that cannot list its hooks must not end the run
        return "unknown", f"could not ask Codex whether factbank's hooks are trusted: {exc}"
    ours = [h for h in listed if is_our_handler({"command": h.get("command", "")})]
    untrusted = sorted({str(h.get("eventName")) for h in ours
                        if h.get("trustStatus") != "trusted"})
    if not ours:
        return "not installed", ("Codex does not list factbank's hooks: run "
                                 "`factbank install codex --trust`")
    if untrusted:
        return "untrusted", (f"Codex skips factbank's untrusted hooks ({', '.join(untrusted)})"
                             ", so no shared context: run `factbank install codex --trust` "
                             "or trust them in Codex's /hooks")
    return "active", "factbank's hooks are installed and trusted in Codex"
