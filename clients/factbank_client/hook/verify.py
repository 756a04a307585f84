"""The background `factbank verify` a SessionStart hook starts ("checked without
anyone asking", off the hook's hot path).

`hookmain.on_session_start` only leaves ("Verify", payload) in `hookmain.AFTER`; once the
hook's output is written, `hookentry.detach` hands the hook's pipes to /dev/null and forks,
and the parent exits: the session never waits for the check. The forked child (its own
session, niced) calls `run`, which replaces itself with `python -m factbank_client.cli.main
verify --quiet` in the session's directory, stdout and stderr appended to
`~/.cache/factbank/verify.log`. A new interpreter, with `site`, because the hook runs under
`-I -S` and the CLI needs httpx; exec, not a child of a child, so nothing waits on it.

`verify --quiet` takes a per-repository lock; when another verify (this session's twin, or
the post-commit hook's) holds it, it asks that one to run once more and leaves
(staleness/runlock.py), so a commit made during a run is still checked.
FACTBANK_VERIFY=0 turns it off.

At most one background verify per repository every `MIN_INTERVAL` seconds, decided here, before
the exec: the CLI's imports alone cost about 0.4 s of CPU, and on a 2-core machine a burst of
session starts (subagents, a bench of 40 back-to-back starts) spawned one full verify each,
which took the session-start hook from ~50 ms to ~240 ms p50 by competing for the CPU. A
commit still verifies at once (the post-commit hook runs `factbank verify` itself).
"""

import os
import sys

from factbank_client.settings import settings

VERIFY_ARGS = ("-m", "factbank_client.cli.main", "verify", "--quiet")
MIN_INTERVAL = 300.0  # seconds between two session-start verifies of one repository


def repo_root(cwd: str) -> str | None:
    """The repository holding `cwd` (project.root_dir), as a string for the stamp's name."""
    from factbank_client.project import root_dir

    return root_dir(cwd)


def due(root: str, now: float | None = None) -> bool:
    """Whether this repository's last session-start verify is MIN_INTERVAL old; if so, the
    stamp is renewed (so a second start a moment later finds it fresh)."""
    import hashlib
    import time

    from factbank_client.paths import cache_dir

    now = time.time() if now is None else now
    stamp = os.path.join(cache_dir(), "verify-" + hashlib.sha256(root.encode()).hexdigest()[:16])
    try:
        if now - os.stat(stamp).st_mtime < MIN_INTERVAL:
            return False
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(stamp), exist_ok=True)
        # O_NOFOLLOW: a link planted at the stamp's name is never opened (nor truncated)
        os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                         0o600))
        os.utime(stamp, (now, now), follow_symlinks=False)
    except OSError:
        return True  # no stamp can be kept: verify anyway (the CLI's lock still holds)
    return True


def wanted(cwd: str) -> bool:
    """A repository here (a `.git` in cwd or a parent) and the check not turned off."""
    if not settings.verify or not cwd:
        return False
    return repo_root(cwd) is not None


def log_path() -> str:
    from factbank_client.paths import cache_dir

    return os.path.join(cache_dir(), "verify.log")


def command() -> list[str]:
    return [sys.executable, *VERIFY_ARGS]


def run(raw: bytes) -> None:
    """In the detached child: become `factbank verify --quiet` in the session's cwd."""
    import json

    data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    cwd = str(data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    root = repo_root(cwd) if wanted(cwd) else None
    if root is None or not due(root):
        return
    os.chdir(cwd)
    path = log_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.execv(sys.executable, command())
