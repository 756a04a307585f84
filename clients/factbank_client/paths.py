"""Where the client keeps what it may lose (caches, hook state, locks): one answer for every
module. Ground floor: imports only `os`, so the hooks, staleness and the code graph can all
stand on it. (`hook/pending.py` keeps its own copy: a recording event's parent process imports
nothing at all, docs/harnesses.md.)"""

from __future__ import annotations

import os


def cache_dir() -> str:
    """`$XDG_CACHE_HOME/factbank`, else `~/.cache/factbank`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "factbank")


def mode_of(path: str) -> int | None:
    """The st_mode `Path(path).exists()` / `.is_file()` look at, without pathlib (the hooks
    never load it, config.py says why): None where those answer False (missing, not a
    directory, a loop, a bad descriptor, an unencodable name); other errors raised, as there."""
    import errno

    try:
        return os.stat(path).st_mode
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            raise
        return None
    except ValueError:
        return None
