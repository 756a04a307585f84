"""What the hooks keep between runs: a tiny per-session file and their own error log.

A hook is a fresh process per event, so the Stop reminder's count ("prompts since the last
save") has to live on disk. One small JSON file per session under the user's cache dir, written
atomically; a missing or corrupt file just means "start counting again". The hooks never print
errors (anything on stdout would land in the model's context), so they append them to
`hooks.log` next to it, rotated at a fixed size. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

LOG_MAX_BYTES = 512 * 1024
STATE_MAX_AGE = 14 * 24 * 3600


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "factbank"


def log_path() -> Path:
    return cache_dir() / "hooks.log"


def log(message: str) -> None:
    """Append one line to hooks.log; never raises (a hook must not fail because of its log)."""
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_suffix(".log.1"))
        except FileNotFoundError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp} pid={os.getpid()} {message}\n")
    except Exception:  # the log is best effort by design
        pass


def _state_file(session_id: str) -> Path:
    digest = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]
    return cache_dir() / "sessions" / f"{digest}.json"


def load(session_id: str) -> dict:
    try:
        data = json.loads(_state_file(session_id).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save(session_id: str, state: dict) -> None:
    path = _state_file(session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state), "utf-8")
    os.replace(tmp, path)


def prune(max_age: float = STATE_MAX_AGE) -> int:
    """Delete session files untouched for `max_age` seconds (run at session start)."""
    removed = 0
    cutoff = time.time() - max_age
    try:
        entries = list(os.scandir(cache_dir() / "sessions"))
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
