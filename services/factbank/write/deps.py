"""What every write needs, built once per process by the service (`runtime.web`) and handed to
each step of the write side."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from factbank.settings import Settings
from factbank.text import embedder


@dataclass
class Deps:
    """What writes need: the pool, the settings, and the embedder (None: lexical only)."""

    pool: asyncpg.Pool
    settings: Settings
    embedder: embedder.Embedder | None
