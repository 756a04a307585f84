"""What one hook event leaves for the session's next: the output waiting in
`sessions/<id>.pending` (a conflict warning, already the exact PostToolUse output JSON).

Its own module, importing only `os`, so both sides stand on it without a circle: the
recording entry (`entry.py`, whose parent process prints what is waiting and loads nothing
else: one more module from bytecode, ~0.1 ms) and the recording child that leaves it
(`record.py`), which the prompt hook also asks (`take_warnings`)."""

import os  # no `from __future__ import annotations`: even that is a module to load


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "factbank")


def safe_name(session_id: str) -> str:
    """A session id as a file name (hook state and pending output). Session ids are UUIDs;
    anything else is made filename-safe (hashlib costs ~10 ms)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in session_id)[:120] or "_"


def pending_path(session: str) -> str:
    """Where an earlier event leaves the output for session `session` (a safe name)."""
    return os.path.join(cache_dir(), "sessions", f"{session}.pending")


def take_pending(session: str) -> bytes:
    """The output an earlier event of `session` left for it ("" if none); taken once (a
    rename, so two hooks never both print it)."""
    if not session:
        return b""
    path = pending_path(session)
    taken = f"{path}.{os.getpid()}"
    try:
        os.rename(path, taken)
    except OSError:
        return b""
    try:  # O_NOFOLLOW: a link planted at the name is consumed, never read through
        fd = os.open(taken, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
        try:
            return os.read(fd, 1 << 20)
        finally:
            os.close(fd)
    except OSError:
        return b""
    finally:
        try:
            os.unlink(taken)
        except OSError:
            pass
