"""The bank versions this machine's own writes produced: read-your-writes across processes.

Ingest answers every write with the bank's new version (`X-Factbank-Version`). Recall, when it
reads a streaming replica that lags, serves a request carrying `X-Factbank-Min-Version: N`
from a copy that has replayed N (waiting a bounded time, else from the primary; ops/README.md,
"Scaling out"). The writer and the next reader are often different processes (the MCP server
saves a fact, the prompt hook of the next turn injects), so the newest version each bank's
writes produced here is kept in one small file, `~/.cache/factbank/written.json`, keyed by
the ingest URL and the bank. Stdlib only: the hooks import it (a read is one small JSON file).

Without a replica the header costs nothing: recall ignores it when it reads the primary.
"""

from __future__ import annotations

import os

from factbank_client import lightjson
from factbank_client.paths import cache_dir

HEADER = "X-Factbank-Min-Version"


def path() -> str:
    return os.path.join(cache_dir(), "written.json")


def _key(url: str, bank: str) -> str:
    return f"{url.rstrip('/')} {bank}"


def _load() -> dict[str, int]:
    try:
        with open(path(), encoding="utf-8") as fh:
            data = lightjson.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}


def seen(url: str, bank: str) -> int | None:
    """The newest version this machine's writes to `bank` at `url` produced, if any."""
    return _load().get(_key(url, bank))


def headers(url: str, bank: str) -> dict[str, str]:
    version = seen(url, bank)
    return {HEADER: str(version)} if version else {}


def remember(url: str, bank: str, version: str | int | None) -> None:
    """Record a write's version (the larger one wins). Never raises: losing this only costs a
    later read its freshness demand, never the write itself."""
    try:
        value = int(version)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return
    if value <= 0:
        return
    try:
        os.makedirs(cache_dir(), mode=0o700, exist_ok=True)
        with _locked():
            data = _load()
            key = _key(url, bank)
            if data.get(key, 0) >= value:
                return
            data[key] = value
            from factbank_client import safefs

            safefs.write(path(), lightjson.dumps(data), private=True)
    except (OSError, ValueError):  # UnsafePath is a ValueError: a link is not followed
        pass


def _locked():
    """Writers (CLI, MCP server, hooks' recording child) take turns on a lock file, so two
    writes at once cannot put an older version back. `contextlib` is imported here, not at
    the top: the prompt hook reads this module, and contextlib brings functools and
    collections (part of the 10 ms `json` cost lightjson.py measures)."""
    import contextlib

    @contextlib.contextmanager
    def held():  # type: ignore[no-untyped-def]
        try:
            import fcntl
        except ImportError:  # not POSIX: last writer wins
            yield
            return
        fd = os.open(path() + ".lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    return held()
