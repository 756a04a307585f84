"""The recall cache: Redis when configured, in-process otherwise, and never a reason to fail.

Keys (all under `fb:`):
- `qe:<bank>:<model>:<sha256(text)>` a query embedding (float32 bytes), 7 days, per bank;
- `r:<bank>:<version>:<sha256(req)>`  a recall result, 10 minutes; the bank version is bumped by
                                      every write, so a write is visible to the next recall;
- `s:<bank>:<session>`                a set of fact ids already injected in a session, 1 day.
When Redis is down or restarted, every call falls back to the in-process store and the error is
counted: recall gets slower (or forgets a session), it never breaks. Hits, misses and errors
are counted per kind, because a cache that never hits looks exactly like one that works.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict, defaultdict
from typing import Any

from factbank.observability import CACHE, digest_of

log = logging.getLogger(__name__)

QUERY_EMBEDDING_TTL = 7 * 24 * 3600
RESULT_TTL = 600
SESSION_TTL = 24 * 3600
PREFIX = "fb:"


def _typed(value: object) -> object:
    """A JSON-encodable form that keeps the type: None, "None", 1, "1" and 1.0 all differ."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return {"__" + type(value).__name__: [_typed(v) for v in items]}
    if isinstance(value, dict):
        return {"__dict": [[_typed(k), _typed(v)] for k, v in sorted(value.items(), key=repr)]}
    return {"__" + type(value).__name__: str(value)}


def digest(*parts: object) -> str:
    """An unambiguous key of `parts`: each is JSON-encoded with its type (so `None` and
    "None", or a separator inside a string, can never make two different requests collide)."""
    encoded = json.dumps([_typed(p) for p in parts], ensure_ascii=False, separators=(",", ":"))
    return digest_of(encoded)


class _Memory:
    """A small LRU with expiry, for one process (the default without REDIS_URL)."""

    def __init__(self, size: int = 20_000) -> None:
        self._data: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._size = size

    def get(self, key: str) -> Any:
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if expires < time.monotonic():
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    def set(self, key: str, value: Any, ttl: int) -> None:
        self._data[key] = (time.monotonic() + ttl, value)
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)


class Cache:
    def __init__(self, redis: Any = None) -> None:
        self.redis = redis
        self.memory = _Memory()
        self.stats: dict[str, dict[str, int]] = defaultdict(
            lambda: {"hits": 0, "misses": 0, "errors": 0}
        )

    @property
    def backend(self) -> str:
        return "redis" if self.redis is not None else "memory"

    def _count(self, kind: str, hit: bool) -> None:
        self.stats[kind]["hits" if hit else "misses"] += 1
        CACHE.labels(kind=kind, result="hit" if hit else "miss").inc()

    def _error(self, kind: str, exc: Exception) -> None:
        self.stats[kind]["errors"] += 1
        CACHE.labels(kind=kind, result="error").inc()
        log.warning("redis %s failed (%s); using the in-process cache", kind, type(exc).__name__)

    async def get(self, kind: str, key: str) -> bytes | None:
        full = PREFIX + key
        value = None
        if self.redis is not None:
            try:
                value = await self.redis.get(full)
            except Exception as exc:
                self._error(kind, exc)
                value = self.memory.get(full)
        else:
            value = self.memory.get(full)
        self._count(kind, value is not None)
        return value

    async def set(self, kind: str, key: str, value: bytes, ttl: int) -> None:
        full = PREFIX + key
        if self.redis is not None:
            try:
                await self.redis.set(full, value, ex=ttl)
                return
            except Exception as exc:
                self._error(kind, exc)
        self.memory.set(full, value, ttl)

    async def seen(self, bank_id: int, session: str) -> set[int]:
        key = f"{PREFIX}s:{bank_id}:{digest(session)}"
        if self.redis is not None:
            try:
                return {int(x) for x in await self.redis.smembers(key)}
            except Exception as exc:
                self._error("session", exc)
        return set(self.memory.get(key) or ())

    async def mark_seen(self, bank_id: int, session: str, fact_ids: list[int]) -> None:
        if not fact_ids:
            return
        key = f"{PREFIX}s:{bank_id}:{digest(session)}"
        if self.redis is not None:
            try:
                pipe = self.redis.pipeline()
                pipe.sadd(key, *fact_ids)
                pipe.expire(key, SESSION_TTL)
                await pipe.execute()
                return
            except Exception as exc:
                self._error("session", exc)
        self.memory.set(key, set(self.memory.get(key) or ()) | set(fact_ids), SESSION_TTL)

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.backend}
        for kind, counts in self.stats.items():
            total = counts["hits"] + counts["misses"]
            out[kind] = {**counts, "hit_rate": round(counts["hits"] / total, 4) if total else None}
        return out


class BankCache(Cache):
    """The recall cache, with hit/miss/error counts kept per bank for `/v1/stats`. Every key
    it is asked for names its bank second (`qe:<bank>:...`, `r:<bank>:...`); the global counts
    (`Cache.stats`, `/metrics`) are the operator's, never shown to a bank token, since another
    bank's hits there say what that bank asked."""

    def __init__(self, redis: Any = None) -> None:
        super().__init__(redis)
        self.by_bank: dict[str, dict[str, dict[str, int]]] = defaultdict(
            lambda: defaultdict(lambda: {"hits": 0, "misses": 0, "errors": 0})
        )

    @staticmethod
    def _bank(key: str) -> str:
        parts = key.split(":", 2)
        return parts[1] if len(parts) == 3 else ""

    async def get(self, kind: str, key: str) -> bytes | None:
        errors = self.stats[kind]["errors"]
        value = await super().get(kind, key)
        counts = self.by_bank[self._bank(key)][kind]
        counts["hits" if value is not None else "misses"] += 1
        counts["errors"] += min(1, self.stats[kind]["errors"] - errors)
        return value

    async def set(self, kind: str, key: str, value: bytes, ttl: int) -> None:
        errors = self.stats[kind]["errors"]
        await super().set(kind, key, value, ttl)
        self.by_bank[self._bank(key)][kind]["errors"] += min(
            1, self.stats[kind]["errors"] - errors
        )

    def snapshot_for(self, bank_id: int) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.backend}
        for kind, counts in self.by_bank.get(str(bank_id), {}).items():
            total = counts["hits"] + counts["misses"]
            out[kind] = {**counts, "hit_rate": round(counts["hits"] / total, 4) if total else None}
        return out
