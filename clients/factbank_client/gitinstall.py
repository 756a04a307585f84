"""`factbank install git` / `factbank uninstall git`: a `post-commit` hook in this repository
that runs `factbank verify --quiet` in the background after each commit (issue 16), so facts
whose quoted lines a commit changed turn stale before the next session starts.

Principle 8 (installers respect the user's files): the hooks directory is git's own answer
(`git rev-parse --git-path hooks`, so `core.hooksPath` is honoured). An existing
`post-commit` that is not ours is renamed, untouched, to `post-commit.factbank-chained`, and
ours runs it first with the same arguments and exits with its status; `uninstall` renames it
back, so the file returns byte for byte with its mode. Re-running `install` rewrites our
script in place. The verify runs detached (`&` in a subshell, output appended to
~/.cache/factbank/verify.log): a commit never waits for it.

What is ours is proved, not guessed (issue 21, A3): a hook is factbank's only when it is a
regular file whose bytes are exactly what `script` writes for the interpreter and log it
names. A hook that merely mentions MARKER, one the user edited, a symbolic link (committed,
planted, or dangling) is foreign: `install` chains it (the directory entry is renamed, a link
stays a link and its target is never opened) and `uninstall` leaves it alone. Our script is
written by `safefs.write` (a fresh O_EXCL|O_NOFOLLOW temp file with a random name renamed over
the hook), so no planted `post-commit.factbank-tmp -> ~/precious.txt`, in `.git/hooks` or in
a `core.hooksPath` folder inside the work tree, is ever written through.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from factbank_client import safefs
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
    """What install or uninstall does (or would do, with --dry-run), for the CLI to print."""

    action: str
    path: Path


def hooks_dir(cwd: Path) -> Path:
    root = repo_root(cwd)
    if root is None:
        raise GitInstallError("not in a git repository: run `factbank install git` inside one")
    out = git(root, "rev-parse", "--git-path", "hooks")
    if not out:
        raise GitInstallError(f"git cannot tell where {root}'s hooks are")
    path = Path(out)
    return path if path.is_absolute() else root / path


_RUN = re.compile(r"^  \( (.+) -m factbank_client\.cli\.main verify --quiet </dev/null >>(.+) "
                  r"2>&1 & \) \\$", re.M)


def ours(path: Path) -> bool:
    """Whether `path` is a regular file holding exactly the script `install` writes (for the
    interpreter and log named in it): the proof that removing or replacing it loses nothing."""
    try:
        data = safefs.read_own(path)
    except (safefs.UnsafePath, OSError):
        return False
    if data is None:
        return False
    text = data.decode("utf-8", "replace")
    m = _RUN.search(text)
    if not m:
        return False
    try:
        python, log = shlex.split(m.group(1)), shlex.split(m.group(2))
    except ValueError:
        return False
    return len(python) == 1 and len(log) == 1 and text == script(python[0], log[0])


def _what(path: Path) -> str:
    """How a foreign hook is described in the step: a file, or a link and where it points."""
    if not path.is_symlink():
        return "the existing hook"
    to = os.readlink(path)
    return f"the existing hook (a {'' if path.exists() else 'dangling '}symbolic link to {to})"


def install(cwd: Path, python: str, log: str, *, dry_run: bool = False) -> list[Step]:
    d = hooks_dir(cwd)
    hook, chained = d / HOOK, d / CHAINED
    text = script(python, log)
    steps: list[Step] = []
    current: bytes | None = None
    if os.path.lexists(hook) and not ours(hook):
        if hook.is_dir() and not hook.is_symlink():
            raise GitInstallError(f"{hook} is a directory: move it away first")
        if os.path.lexists(chained):
            raise GitInstallError(f"{chained} exists already and {hook} is not factbank's: "
                                  "move one of them away first")
        steps.append(Step(f"kept {_what(hook)}, chained (renamed to {CHAINED})", hook))
        if not dry_run:
            os.rename(hook, chained)  # the entry moves; a link's target is never opened
    elif os.path.lexists(hook):
        current = safefs.read_own(hook)
    if current == text.encode("utf-8"):
        return steps or [Step("already installed", hook)]
    steps.append(Step("updated" if current is not None else "created", hook))
    if not dry_run:
        umask = os.umask(0)
        os.umask(umask)
        try:
            safefs.write(hook, text, mode=(0o777 & ~umask) | stat.S_IXUSR)
        except safefs.UnsafePath as exc:
            raise GitInstallError(str(exc)) from None
        except OSError as exc:  # e.g. the hooks folder is a dangling link
            raise GitInstallError(f"cannot write {hook}: {exc.strerror or exc}") from None
    return steps


def uninstall(cwd: Path, *, dry_run: bool = False) -> list[Step]:
    d = hooks_dir(cwd)
    hook, chained = d / HOOK, d / CHAINED
    if not ours(hook):
        return [Step("nothing to uninstall (not factbank's)" if os.path.lexists(hook)
                     else "nothing to uninstall", hook)]
    if os.path.lexists(chained):
        if not dry_run:
            os.replace(chained, hook)
        return [Step(f"restored the chained hook (from {CHAINED})", hook)]
    if not dry_run and not safefs.delete(hook, safefs.read_own(hook) or b""):
        return [Step("nothing to uninstall (changed while uninstalling)", hook)]
    return [Step("deleted", hook)]
