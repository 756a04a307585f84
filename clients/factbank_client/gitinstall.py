"""`factbank install git` / `factbank uninstall git`: a `post-commit` hook in this repository
that runs `factbank verify --quiet` in the background after each commit (issue 16), so facts
whose quoted lines a commit changed turn stale before the next session starts.

Principle 8 (installers respect the user's files): the hooks directory is git's own answer
(`git rev-parse --git-path hooks`, so `core.hooksPath` is honoured). An existing
`post-commit` that is not ours is renamed, untouched, to `post-commit.factbank-chained`, and
ours runs it first with the same arguments and exits with its status; `uninstall` renames it
back, so the file returns byte for byte with its mode. Re-running `install` rewrites our
script in place; our script is recognised by MARKER. The verify runs detached (`&` in a
subshell, output appended to ~/.cache/factbank/verify.log): a commit never waits for it.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from factbank_client.fingerprint import git
from factbank_client.project import repo_root

MARKER = "factbank-post-commit"
HOOK = "post-commit"
CHAINED = "post-commit.factbank-chained"


class GitInstallError(Exception):
    pass


def script(python: str, log: str) -> str:
    q = shlex.quote
    return f"""#!/bin/sh
# {MARKER}: installed by `factbank install git`; `factbank uninstall git` removes it (and
# puts back the hook it chained, byte for byte). Re-checks this repository's facts in the
# background after each commit: `factbank verify --quiet`.
status=0
chained="$(dirname "$0")/{CHAINED}"
if [ -x "$chained" ]; then
  "$chained" "$@"
  status=$?
fi
if [ "${{FACTBANK_VERIFY:-1}}" != "0" ]; then
  mkdir -p {q(os.path.dirname(log))} 2>/dev/null
  ( {q(python)} -m factbank_client.cli.main verify --quiet </dev/null >>{q(log)} 2>&1 & ) \\
    >/dev/null 2>&1
fi
exit $status
"""


@dataclass
class Step:
    """What install or uninstall does (or would do, with --dry-run), for the CLI to print as
    `ACTION PATH (DETAIL)`: `action` is created, updated, deleted, renamed, restored or
    unchanged. `old` and `new` are the file's text before and after (None: no file), so
    --dry-run shows the diff it would write."""

    action: str
    path: Path
    detail: str = ""
    old: str | None = None
    new: str | None = None


def hooks_dir(cwd: Path) -> Path:
    root = repo_root(cwd)
    if root is None:
        raise GitInstallError("not in a git repository: run `factbank install git` inside one")
    out = git(root, "rev-parse", "--git-path", "hooks")
    if not out:
        raise GitInstallError(f"git cannot tell where {root}'s hooks are")
    path = Path(out)
    return path if path.is_absolute() else root / path


def ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text("utf-8", errors="replace")
    except OSError:
        return False


def install(cwd: Path, python: str, log: str, *, dry_run: bool = False) -> list[Step]:
    d = hooks_dir(cwd)
    hook, chained = d / HOOK, d / CHAINED
    text = script(python, log)
    steps: list[Step] = []
    chaining = hook.exists() and not ours(hook)
    if chaining:
        if chained.exists():
            raise GitInstallError(f"{chained} exists already and {hook} is not factbank's: "
                                  "move one of them away first")
        steps.append(Step("renamed", hook, f"to {CHAINED}: your hook, kept and run first"))
        if not dry_run:
            hook.rename(chained)
    # In a dry run a hook being chained is still there: what ours replaces is no file.
    current = None if chaining or not hook.exists() else hook.read_text("utf-8")
    if current == text:
        return steps or [Step("unchanged", hook, "already installed")]
    steps.append(Step("updated" if current is not None else "created", hook, old=current,
                      new=text))
    if not dry_run:
        d.mkdir(parents=True, exist_ok=True)
        tmp = hook.with_name(HOOK + ".factbank-tmp")
        tmp.write_text(text, "utf-8")
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.replace(tmp, hook)
    return steps


def uninstall(cwd: Path, *, dry_run: bool = False) -> list[Step]:
    d = hooks_dir(cwd)
    hook, chained = d / HOOK, d / CHAINED
    if not ours(hook):
        return [Step("unchanged", hook, "not factbank's: nothing to uninstall" if hook.exists()
                     else "nothing to uninstall")]
    text = hook.read_text("utf-8", errors="replace")
    if chained.exists():
        back = chained.read_text("utf-8", errors="replace")
        if not dry_run:
            os.replace(chained, hook)
        return [Step("restored", hook, f"your hook, from {CHAINED}", old=text, new=back)]
    if not dry_run:
        hook.unlink()
    return [Step("deleted", hook, old=text)]
