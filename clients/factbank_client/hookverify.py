"""The background `factbank verify` a SessionStart hook starts (issue 16: "checked without
anyone asking", off the hook's hot path).

`hookmain.on_session_start` only leaves ("Verify", payload) in `hookmain.AFTER`; once the
hook's output is written, `hookentry.detach` hands the hook's pipes to /dev/null and forks,
and the parent exits: the session never waits for the check. The forked child (its own
session, niced) calls `run`, which replaces itself with `python -m factbank_client.cli.main
verify --quiet` in the session's directory, stdout and stderr appended to
`~/.cache/factbank/verify.log`. A new interpreter, with `site`, because the hook runs under
`-I -S` and the CLI needs httpx; exec, not a child of a child, so nothing waits on it.

`verify --quiet` takes a per-repository lock and does nothing when another verify (this
session's twin, or the post-commit hook's) holds it. FACTBANK_VERIFY=0 turns it off.
"""

import os
import sys

VERIFY_ARGS = ("-m", "factbank_client.cli.main", "verify", "--quiet")


def wanted(cwd: str) -> bool:
    """A repository here (a `.git` in cwd or a parent) and the check not turned off."""
    if os.environ.get("FACTBANK_VERIFY", "1") == "0" or not cwd:
        return False
    d = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return True
        parent = os.path.dirname(d)
        if parent == d:
            return False
        d = parent


def log_path() -> str:
    from factbank_client.hookentry import cache_dir

    return os.path.join(cache_dir(), "verify.log")


def command() -> list[str]:
    return [sys.executable, *VERIFY_ARGS]


def run(raw: bytes) -> None:
    """In the detached child: become `factbank verify --quiet` in the session's cwd."""
    import json

    data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    cwd = str(data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    if not wanted(cwd):
        return
    os.chdir(cwd)
    path = log_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.execv(sys.executable, command())
