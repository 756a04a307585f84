"""`factbank install git` / `factbank uninstall git`: a `post-commit` hook in this repository
that runs `factbank verify --quiet` in the background after each commit, so facts
whose quoted lines a commit changed turn stale before the next session starts.

docs/principles.md#installers-respect-the-users-files (installers respect the user's files): the
hooks directory is git's own answer
(`git rev-parse --git-path hooks`, so `core.hooksPath` is honoured). An existing
`post-commit` that is not ours is renamed, untouched, to `post-commit.factbank-chained`, and
ours runs it first with the same arguments and exits with its status; `uninstall` renames it
back, so the file returns byte for byte with its mode. Re-running `install` rewrites our
script in place. The verify runs detached (`&` in a subshell, output appended to
~/.cache/factbank/verify.log): a commit never waits for it.

`factbank install git --pre-push` adds a `pre-push` hook too (optional, the same rules): before
a push it prints what the pushed commits would do to this repository's facts (`factbank verify
--diff REMOTE...LOCAL`, docs/staleness.md): would go stale, would move, each with the command
that settles it. It never blocks by default (a memory tool's opinion is no reason to refuse a
push; the CI job is where a team enforces it); `FACTBANK_PRE_PUSH=block` refuses a push that
would make a fact stale (`git push --no-verify` still pushes), and a bank that cannot be reached
never blocks. `uninstall git` removes whichever of the two hooks is ours.

What is ours is proved, not guessed: a hook is factbank's only when it is a
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
from factbank_client.errors import GitInstallError, UnsafePath
from factbank_client.project import repo_root
from factbank_client.staleness.fingerprint import git

MARKER = "factbank-post-commit"
HOOK = "post-commit"
CHAINED = "post-commit.factbank-chained"
PRE_PUSH = "pre-push"
PRE_PUSH_MARKER = "factbank-pre-push"


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


def pre_push_script(python: str) -> str:
    """The pre-push hook: one `factbank verify --diff` per pushed ref, from what the remote
    has (or, for a new branch, the remote's default branch) to what is pushed, reported on
    stderr. Exit 1 only with FACTBANK_PRE_PUSH=block and a fact that would go stale."""
    q = shlex.quote
    chained = f"{PRE_PUSH}.factbank-chained"
    return f"""#!/bin/sh
# {PRE_PUSH_MARKER}: installed by `factbank install git --pre-push`; `factbank uninstall git`
# removes it (and puts back the hook it chained, byte for byte). Reports the facts of this
# repository that the pushed commits would make stale or move (`factbank verify --diff`).
# FACTBANK_PRE_PUSH=block refuses such a push; FACTBANK_VERIFY=0 skips the check.
input=$(cat)
chained="$(dirname "$0")/{chained}"
if [ -x "$chained" ]; then
  printf '%s\n' "$input" | "$chained" "$@" || exit $?
fi
[ "${{FACTBANK_VERIFY:-1}}" = "0" ] && exit 0
fail=never
[ "${{FACTBANK_PRE_PUSH:-warn}}" = "block" ] && fail=stale
printf '%s\n' "$input" | {{
  rc=0
  while read -r lref lsha rref rsha; do
    case "$lsha" in *[!0]*) ;; *) continue ;; esac
    case "$rsha" in
      *[!0]*) base="$rsha" ;;
      *) base=$(git rev-parse -q --verify "refs/remotes/$1/HEAD") || continue ;;
    esac
    {q(python)} -m factbank_client.cli.main verify --diff "$base...$lsha" --fail-on "$fail" \
      </dev/null >&2
    [ $? -eq 1 ] && rc=1
  done
  exit $rc
}} || {{
  echo "factbank: push refused (FACTBANK_PRE_PUSH=block): settle the facts above, or push" \
    "with --no-verify" >&2
  exit 1
}}
exit 0
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


_RUN = re.compile(r"^  \( (.+) -m factbank_client\.cli\.main verify --quiet </dev/null >>(.+) "
                  r"2>&1 & \) \\$", re.M)


_PUSH_RUN = re.compile(r"^    (.+) -m factbank_client\.cli\.main verify --diff ", re.M)


def ours(path: Path) -> bool:
    """Whether `path` is a regular file holding exactly the script `install` writes for its
    name (post-commit, or pre-push), for the interpreter (and log) named in it: the proof
    that removing or replacing it loses nothing."""
    try:
        data = safefs.read_own(path)
    except (UnsafePath, OSError):
        return False
    if data is None:
        return False
    text = data.decode("utf-8", "replace")
    m = (_PUSH_RUN if path.name == PRE_PUSH else _RUN).search(text)
    if not m:
        return False
    try:
        words = [shlex.split(g) for g in m.groups()]
    except ValueError:
        return False
    if any(len(w) != 1 for w in words):
        return False
    if path.name == PRE_PUSH:
        return text == pre_push_script(words[0][0])
    return text == script(words[0][0], words[1][0])


def _what(path: Path) -> str:
    """How a foreign hook is described in the step: a file, or a link and where it points."""
    if not path.is_symlink():
        return "your hook"
    to = os.readlink(path)
    return f"your hook (a {'' if path.exists() else 'dangling '}symbolic link to {to})"


def _text(path: Path) -> str | None:
    """A hook's text for the step's diff, never read through a link (a link is shown as
    one line naming its target)."""
    if path.is_symlink():
        return f"(a symbolic link to {os.readlink(path)})\n"
    try:
        data = safefs.read_own(path)
    except (UnsafePath, OSError):
        return None
    return None if data is None else data.decode("utf-8", "replace")


def install(cwd: Path, python: str, log: str, *, dry_run: bool = False,
            pre_push: bool = False) -> list[Step]:
    """The post-commit hook, and with `pre_push` the pre-push hook too."""
    d = hooks_dir(cwd)
    steps = _install_one(d, HOOK, script(python, log), dry_run)
    if pre_push:
        steps += _install_one(d, PRE_PUSH, pre_push_script(python), dry_run)
    return steps


def _install_one(d: Path, name: str, text: str, dry_run: bool) -> list[Step]:
    hook, chained = d / name, d / f"{name}.factbank-chained"
    steps: list[Step] = []
    current: str | None = None
    chaining = os.path.lexists(hook) and not ours(hook)
    if chaining:
        if hook.is_dir() and not hook.is_symlink():
            raise GitInstallError(f"{hook} is a directory: move it away first")
        if os.path.lexists(chained):
            raise GitInstallError(f"{chained} exists already and {hook} is not factbank's: "
                                  "move one of them away first")
        steps.append(Step("renamed", hook, f"to {chained.name}: {_what(hook)}, kept and run "
                                           "first"))
        if not dry_run:
            os.rename(hook, chained)  # the entry moves; a link's target is never opened
    elif os.path.lexists(hook):
        current = _text(hook)
    # In a dry run a hook being chained is still there: what ours replaces is no file.
    if current == text:
        return steps or [Step("unchanged", hook, "already installed")]
    steps.append(Step("updated" if current is not None else "created", hook, old=current,
                      new=text))
    if not dry_run:
        umask = os.umask(0)
        os.umask(umask)
        try:
            safefs.write(hook, text, mode=(0o777 & ~umask) | stat.S_IXUSR)
        except UnsafePath as exc:
            raise GitInstallError(str(exc)) from None
        except OSError as exc:  # e.g. the hooks folder is a dangling link
            raise GitInstallError(f"cannot write {hook}: {exc.strerror or exc}") from None
    return steps


def uninstall(cwd: Path, *, dry_run: bool = False) -> list[Step]:
    """The post-commit hook, and the pre-push hook when it is ours."""
    d = hooks_dir(cwd)
    steps = _uninstall_one(d, HOOK, dry_run)
    if ours(d / PRE_PUSH):
        steps += _uninstall_one(d, PRE_PUSH, dry_run)
    return steps


def _uninstall_one(d: Path, name: str, dry_run: bool) -> list[Step]:
    hook, chained = d / name, d / f"{name}.factbank-chained"
    if not ours(hook):
        return [Step("unchanged", hook, "not factbank's: nothing to uninstall"
                     if os.path.lexists(hook) else "nothing to uninstall")]
    data = safefs.read_own(hook) or b""
    text = data.decode("utf-8", "replace")
    if os.path.lexists(chained):
        back = _text(chained)
        if not dry_run:
            os.replace(chained, hook)  # a chained link comes back as the link it was
        return [Step("restored", hook, f"{_what(chained)}, from {chained.name}", old=text,
                     new=back)]
    if not dry_run and not safefs.delete(hook, data):
        return [Step("unchanged", hook, "changed while uninstalling: left alone")]
    return [Step("deleted", hook, old=text)]
