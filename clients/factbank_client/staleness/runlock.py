"""One background `verify --quiet` per repository at a time, and never a commit left unchecked.

The session-start hook and the post-commit hook both start `factbank verify --quiet` in the
background. Two at once would judge the same facts twice, so a per-repository `flock` lets one
run. The one that finds the lock taken used to do nothing ("the running one covers it"), which
was wrong whenever the running verify had read the repository *before* the commit: a session
starts, its verify is still reading (slow on a loaded machine), the user commits, the
post-commit verify finds the lock taken and leaves, and the fact the commit broke stays fresh
until the next commit. That is the most likely way the harness test of this path once
failed under CI's load (its log: "1 fresh, 0 turned stale").

Now the caller that finds the lock taken leaves an `again` flag before leaving; the holder
clears the flag before each run and, when it finds the flag set after a run, runs once more.
A burst of commits during one run costs one more run, not one each. The order closes the
gaps: the holder checks the flag once while holding the lock and once after releasing it (a
caller that set the flag in between then either gets the lock itself, or a newer holder that
cleared the flag after it was set runs); a caller that set the flag tries the lock once more,
in case the holder released it between the caller's first try and the flag.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

from factbank_client.paths import cache_dir

T = TypeVar("T")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _paths(root: Path) -> tuple[str, str]:
    name = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    base = os.path.join(cache_dir(), f"verify-{name}")
    return base + ".lock", base + ".again"


def take(root: Path) -> IO[str] | None:
    """The repository's verify lock (non-blocking), or None when another verify holds it.
    OSError when the lock file cannot be opened."""
    import fcntl

    path = _paths(root)[0]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # O_NOFOLLOW, no truncation: a link planted at the name is refused, never emptied
    fh = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600), "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def _flag(path: str) -> None:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o600))
    except OSError:
        pass  # a link planted at the name: refused; the holder simply does not run again


def _clear(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def run_once_more_if_asked(root: Path, work: Callable[[], T]) -> list[T]:
    """Run `work` under the repository's verify lock, again while another caller asked during
    a run; the results of the runs made here, in order ([] when another holder took the
    request over)."""
    again = _paths(root)[1]
    lock = take(root)
    if lock is None:
        _flag(again)
        lock = take(root)  # the holder may have let go between the first try and the flag
        if lock is None:
            return []
    results: list[T] = []
    try:
        while True:
            _clear(again)
            results.append(work())
            if os.path.exists(again):
                continue
            lock.close()
            lock = None
            if not os.path.exists(again):
                return results
            lock = take(root)
            if lock is None:
                return results  # a newer holder took the lock after the flag: it runs
    finally:
        if lock is not None:
            lock.close()
