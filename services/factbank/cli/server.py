"""Server-side commands: `up` (the embedded default), `migrate`, `serve`.

Registered through the `factbank.commands` entry points; this package's `__init__` leaves
them out of a light client install. The store and the runner are imported when a command
runs, not when `factbank` builds its parser (they pull in asyncpg, litestar and numpy).
"""

from __future__ import annotations

import asyncio
import getpass
import re
import shlex
import shutil
import socket
import sys
from pathlib import Path

from factbank.runtime.settings import Settings
from factbank_client.cli.main import CommandError


def register(sub) -> None:
    p = sub.add_parser(
        "up", help="start Postgres (embedded unless DATABASE_URL) and both services",
        description="Start PostgreSQL (the embedded one in FACTBANK_HOME unless DATABASE_URL is "
                    "set), apply the migrations and run the ingest and recall services until "
                    "Ctrl-C. On the first run it creates your personal bank and prints its "
                    "token once. The URLs are printed once both services answer /readyz; "
                    "ports: FACTBANK_INGEST_PORT / FACTBANK_RECALL_PORT (8701/8702).")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("migrate", help="apply pending database migrations",
                       description="Apply, in order, the numbered SQL files of migrations/ that "
                       "the database at DATABASE_URL has not recorded yet, and name them. "
                       "`factbank up` does this itself; compose runs it as its migrate "
                       "service, before the services start.")
    p.set_defaults(func=cmd_migrate)
    p = sub.add_parser("serve", help="run one service (for compose, replicas and workers)",
                       description="Run one service over the database at DATABASE_URL until "
                       "stopped: ingest (the write gate; FACTBANK_INGEST_PORT, 8701), recall "
                       "(search and injection; FACTBANK_RECALL_PORT, 8702) or worker (the "
                       "embedder that fills queued vectors apart from the API; health on "
                       "FACTBANK_WORKER_PORT, 8703; run ingest with FACTBANK_VECTOR_BATCH=0). "
                       "Any number of copies of each may run against one database; on one "
                       "machine `factbank up` runs ingest and recall. Run `factbank migrate` "
                       "first.")
    p.add_argument("service", choices=["ingest", "recall", "worker"],
                   help="which service to run: ingest, recall or worker")
    p.add_argument("--host", default=None, help="bind address (default FACTBANK_HOST)")
    p.add_argument("--port", type=int, default=None,
                   help="port (default FACTBANK_INGEST_PORT, FACTBANK_RECALL_PORT or "
                        "FACTBANK_WORKER_PORT)")
    p.set_defaults(func=cmd_serve)


def _dsn_or_fail(settings) -> str:
    if not settings.database_url:
        raise CommandError("DATABASE_URL is not set (or run `factbank up` for the embedded one)")
    return settings.database_url


async def _migrate(dsn: str) -> list[str]:
    from factbank.store import db, migrations

    conn = await db.connect(dsn)
    try:
        return [m.name for m in await migrations.migrate(conn)]
    finally:
        await conn.close()


def cmd_migrate(args) -> int:
    settings = Settings.from_env()
    applied = asyncio.run(_migrate(_dsn_or_fail(settings)))
    print(f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else ""))
    return 0


def cmd_serve(args) -> int:
    overrides = {"host": args.host} if args.host else {}
    settings = Settings.from_env(**overrides)
    from factbank.runtime.runner import run_services

    default = {"ingest": settings.ingest_port, "recall": settings.recall_port,
               "worker": settings.worker_port}
    port = args.port or default[args.service]
    asyncio.run(run_services(settings, _dsn_or_fail(settings), (args.service,),
                             {args.service: port}))
    return 0


def _bank_name() -> str:
    user = re.sub(r"[^a-z0-9_.-]", "-", getpass.getuser().lower()).strip("-.") or "me"
    return user[:40]


async def _first_run(dsn: str) -> tuple[str, str] | None:
    """On an empty database, create the personal bank and its owner token."""
    from factbank.store import banks, db

    conn = await db.connect(dsn)
    try:
        if await banks.list_banks(conn):
            return None
        name = _bank_name()
        await banks.create_bank(conn, name, "personal")
        _, token = await banks.issue_token(conn, name, name, "read,write,admin", "owner")
        return name, token
    finally:
        await conn.close()


def runnable_command() -> str:
    """How to run `factbank` from a shell: the bare name when PATH finds this very install,
    else the absolute path of the venv's script (the Quick start does not touch PATH)."""
    script = Path(sys.executable).parent / "factbank"
    found = shutil.which("factbank")
    if found and (not script.exists() or Path(found).resolve() == script.resolve()):
        return "factbank"
    if script.exists():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m factbank_client.cli.main"


def _listener(host: str, port: int) -> str | None:
    """None when nothing listens on host:port; "factbank" when a factbank service answers
    there, else "other"."""
    probe = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
    try:
        with socket.create_connection((probe, port), timeout=1):
            pass
    except OSError:
        return None
    import httpx

    base = f"[{probe}]" if ":" in probe else probe
    try:
        r = httpx.get(f"http://{base}:{port}/healthz", timeout=2)
        if r.status_code == 200 and r.json().get("status") == "ok":
            return "factbank"
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return "other"


def _refuse_if_running(settings) -> None:
    """A second `up` says one is already running instead of dying on "address in use"."""
    ports = {"ingest": settings.ingest_port, "recall": settings.recall_port}
    seen = {name: _listener(settings.host, port) for name, port in ports.items()}
    if all(v is None for v in seen.values()):
        return
    urls = ", ".join(f"{name} http://{settings.host}:{ports[name]}" for name in ports)
    if "factbank" in seen.values():
        raise CommandError(
            f"factbank is already running ({urls}); use it, or stop it with Ctrl-C in its "
            "terminal first. To run a second one, set FACTBANK_INGEST_PORT, "
            "FACTBANK_RECALL_PORT and FACTBANK_HOME.")
    busy = ", ".join(f"{ports[n]} ({n})" for n, v in seen.items() if v)
    raise CommandError(f"port {busy} is in use by another program; free it or choose other "
                       "ports with FACTBANK_INGEST_PORT / FACTBANK_RECALL_PORT")


def _banner(settings, where: str, created: tuple[str, str] | None) -> str:
    fb = runnable_command()
    ingest = f"http://{settings.host}:{settings.ingest_port}"
    recall = f"http://{settings.host}:{settings.recall_port}"
    cache = "Redis at REDIS_URL" if settings.redis_url else "in-process cache"
    # login derives recall as the ingest port + 1; name it when that is not where it is.
    recall_flag = ("" if settings.recall_port == settings.ingest_port + 1
                   else f" --recall-url {recall}")
    lines = [""]
    if created:
        bank, token = created
        lines += [f"created personal bank '{bank}'. Its token is shown only this once:", "",
                  f"    {token}", "", "Next:",
                  f"    {fb} login --url {ingest}{recall_flag} --token {token}",
                  f"    {fb} install all     # hooks + MCP for Claude Code, Codex and Pi", ""]
        issue = f"{fb} admin token issue {bank} {bank} --scopes read,write,admin"
    else:
        issue = (f"{fb} admin token issue BANK MEMBER --scopes read,write,admin   "
                 f"(banks: {fb} admin bank list)")
    if fb != "factbank":
        lines += [f"(`factbank` is not on PATH: run it as {fb}, or add "
                  f"{shlex.quote(str(Path(sys.executable).parent))} to PATH)"]
    lines += [f"A new token (a token is never shown again): {issue}",
              f"factbank up: ingest {ingest}, recall {recall} ({where}, {cache}); both ready. "
              "Ctrl-C stops."]
    return "\n".join(lines)


def cmd_up(args) -> int:
    settings = Settings.from_env()
    from factbank.runtime.embedded import EmbeddedPostgres
    from factbank.runtime.runner import run_services

    _refuse_if_running(settings)
    embedded = None
    if settings.database_url:
        dsn = settings.database_url
        where = "DATABASE_URL"
    else:
        embedded = EmbeddedPostgres(settings.home)
        print(f"starting embedded PostgreSQL in {embedded.pgdata} ...", flush=True)
        dsn = embedded.start()
        where = f"embedded Postgres in {embedded.pgdata}"
    try:
        applied = asyncio.run(_migrate(dsn))
        if applied:
            print(f"applied migrations: {', '.join(applied)}")
        created = asyncio.run(_first_run(dsn))
        print("starting the ingest and recall services ...", flush=True)
        shown = []

        def ready() -> None:
            # Last, once both answer /readyz: after every startup log line.
            sys.stderr.flush()
            print(_banner(settings, where, created), flush=True)
            shown.append(True)

        try:
            asyncio.run(run_services(settings, dsn, on_ready=ready))
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        finally:
            if created and not shown:  # never lose the only copy of a new token
                print(f"\nthe services did not become ready; the personal bank '{created[0]}' "
                      f"was created and its token is: {created[1]}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        if embedded is not None:
            embedded.stop()
            print("stopped embedded PostgreSQL", file=sys.stderr)
    return 0
