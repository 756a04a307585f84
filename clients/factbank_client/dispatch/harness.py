"""How each harness is run headless with its JSON event stream (flags checked on the installed
binaries: Claude Code 2.1.197, Codex 0.171.0, Pi 0.73.1).

* Claude Code: `claude -p TASK --output-format stream-json --verbose` (stream-json needs
  `--verbose` under `-p`) with `--permission-mode acceptEdits`: `claude -p` denies any tool
  that would need a prompt, so without it no edit happens; shell commands still need the
  user's own `permissions.allow` (the harness's normal config), or `permissions="full"`
  (`bypassPermissions`).
* Codex: `codex exec --json --skip-git-repo-check --sandbox workspace-write TASK`: `exec`
  defaults to a read-only sandbox, in which no edit can happen. Hooks run only if the user
  trusted them (`factbank install codex --trust`); dispatch never passes
  `--dangerously-bypass-hook-trust` on its own. `permissions="full"`:
  `--sandbox danger-full-access`.
* Pi: `pi -p --mode json TASK` (Pi has no permission system; its tools always run).

The binary is `binaries[agent]`, else `$FACTBANK_DISPATCH_<AGENT>` (e.g.
`FACTBANK_DISPATCH_CLAUDE=/opt/claude`), else the agent's name on PATH.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence

from factbank_client.errors import DispatchError
from factbank_client.settings import settings

AGENTS: tuple[str, ...] = ("claude", "codex", "pi")
LABELS = {"claude": "Claude Code", "codex": "Codex", "pi": "Pi"}
PERMISSIONS = ("default", "full")


def find_binary(agent: str, binaries: Mapping[str, str] | None = None,
                path: str | None = None) -> str:
    check_agent(agent)
    explicit = (binaries or {}).get(agent) or settings.dispatch_bin(agent)
    found = explicit or shutil.which(agent, path=path)
    if not found or (explicit and not os.access(explicit, os.X_OK)):
        raise DispatchError(
            f"agent {agent!r}: {explicit or agent!r} is not an executable on PATH; install "
            f"{LABELS[agent]} or set FACTBANK_DISPATCH_{agent.upper()} to its path")
    return found


def check_agent(agent: str) -> None:
    if agent not in AGENTS:
        raise DispatchError(f"agent: unknown agent {agent!r}; one of {', '.join(AGENTS)}")


def argv(agent: str, task: str, binary: str, *, permissions: str = "default",
         extra_args: Sequence[str] = ()) -> list[str]:
    """The harness's command line. `extra_args` go right after the binary (after `exec` for
    Codex), before the task."""
    check_agent(agent)
    if permissions not in PERMISSIONS:
        raise DispatchError(f"permissions: {permissions!r} is not one of "
                            f"{', '.join(PERMISSIONS)}")
    if not task.strip():
        raise DispatchError("task: a run needs a task")
    # A task that starts with "-" would be read as an option by all three.
    prompt = " " + task if task.startswith("-") else task
    full = permissions == "full"
    if agent == "claude":
        mode = "bypassPermissions" if full else "acceptEdits"
        return [binary, *extra_args, "-p", prompt, "--output-format", "stream-json",
                "--verbose", "--permission-mode", mode]
    if agent == "codex":
        sandbox = "danger-full-access" if full else "workspace-write"
        return [binary, "exec", *extra_args, "--json", "--skip-git-repo-check", "--sandbox",
                sandbox, prompt]
    return [binary, *extra_args, "-p", "--mode", "json", prompt]
