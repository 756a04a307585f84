"""What the hooks keep between runs: a tiny per-session file and their own error log.

A hook is a fresh process per event, so the Stop reminder's count ("prompts since the last
save") has to live on disk. One small JSON file per session under the user's cache dir, written
atomically; a missing or corrupt file just means "start counting again". The hooks never print
errors (anything on stdout would land in the model's context), so they append them to
`hooks.log` next to it, rotated at a fixed size. Standard library only, and os.path rather
than pathlib: the Stop hook imports nothing else, and pathlib alone costs it ~10 ms.
"""

from __future__ import annotations

import os
import time

from factbank_client import lightjson
from factbank_client.hook.pending import safe_name
from factbank_client.paths import cache_dir

LOG_MAX_BYTES = 512 * 1024
STATE_MAX_AGE = 14 * 24 * 3600


def log_path() -> str:
    return os.path.join(cache_dir(), "hooks.log")


def log(message: str) -> None:
    """Append one line to hooks.log; never raises (a hook must not fail because of its log)."""
    try:
        path = log_path()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            if os.stat(path).st_size > LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND
                     | getattr(os, "O_NOFOLLOW", 0), 0o600)  # never through a planted link
        try:
            os.write(fd, f"{stamp} pid={os.getpid()} {message}\n".encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:  # the log is best effort by design
        pass


def _state_file(session_id: str, kind: str = "") -> str:
    name = safe_name(session_id) + (f".{kind}" if kind else "")
    return os.path.join(cache_dir(), "sessions", f"{name}.json")


def load(session_id: str, kind: str = "") -> dict:
    """One session's state: the Stop reminder's counts (`kind` ""), or the timeline's place
    in Codex's rollout (`kind` "timeline", written by the recording child: its own file, so
    the two never overwrite each other's keys)."""
    try:
        with open(_state_file(session_id, kind), encoding="utf-8") as fh:
            data = lightjson.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save(session_id: str, state: dict, kind: str = "") -> None:
    from factbank_client import safefs

    safefs.write(_state_file(session_id, kind), lightjson.dumps(state), private=True)


def prune(max_age: float = STATE_MAX_AGE) -> int:
    """Delete session files untouched for `max_age` seconds (run at session start)."""
    removed = 0
    cutoff = time.time() - max_age
    try:
        entries = list(os.scandir(os.path.join(cache_dir(), "sessions")))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed
