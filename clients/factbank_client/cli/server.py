"""Server-side commands: `up` (the embedded default), `migrate`, `serve`."""

from __future__ import annotations

import asyncio
import getpass
import re
import sys

from factbank_client.cli.main import CommandError


def register(sub) -> None:
    p = sub.add_parser("up", help="start Postgres (embedded unless DATABASE_URL) and both services")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("migrate", help="apply pending database migrations")
    p.set_defaults(func=cmd_migrate)
    p = sub.add_parser("serve", help="run one service (for compose and replicas)")
    p.add_argument("service", choices=["ingest", "recall"])
    p.add_argument("--host", default=None, help="bind address (default FACTBANK_HOST)")
    p.add_argument("--port", type=int, default=None)
    p.set_defaults(func=cmd_serve)


def _server_imports():
    try:
        from factbank.settings import Settings
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CommandError("this needs the server extra: pip install 'factbank[server]'") from exc
    return Settings


def _dsn_or_fail(settings) -> str:
    if not settings.database_url:
        raise CommandError("DATABASE_URL is not set (or run `factbank up` for the embedded one)")
    return settings.database_url


async def _migrate(dsn: str) -> list[str]:
    from factbank import db, migrations

    conn = await db.connect(dsn)
    try:
        return [m.name for m in await migrations.migrate(conn)]
    finally:
        await conn.close()


def cmd_migrate(args) -> int:
    settings = _server_imports().from_env()
    applied = asyncio.run(_migrate(_dsn_or_fail(settings)))
    print(f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else ""))
    return 0


def cmd_serve(args) -> int:
    Settings = _server_imports()
    overrides = {"host": args.host} if args.host else {}
    settings = Settings.from_env(**overrides)
    from factbank.runner import run_services

    port = args.port or (settings.ingest_port if args.service == "ingest" else settings.recall_port)
    asyncio.run(run_services(settings, _dsn_or_fail(settings), (args.service,),
                             {args.service: port}))
    return 0


def _bank_name() -> str:
    user = re.sub(r"[^a-z0-9_.-]", "-", getpass.getuser().lower()).strip("-.") or "me"
    return user[:40]


async def _first_run(dsn: str) -> tuple[str, str] | None:
    """On an empty database, create the personal bank and its owner token."""
    from factbank import banks, db

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


def cmd_up(args) -> int:
    settings = _server_imports().from_env()
    from factbank.embedded import EmbeddedPostgres
    from factbank.runner import run_services

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
        ingest = f"http://{settings.host}:{settings.ingest_port}"
        recall = f"http://{settings.host}:{settings.recall_port}"
        if created:
            bank, token = created
            print(f"\ncreated personal bank '{bank}'. Its token is shown only this once:\n")
            print(f"    {token}\n")
            print("Next:")
            print(f"    factbank login --url {ingest} --token {token}")
            print("    factbank install all     # hooks + MCP for Claude Code, Codex and Pi\n")
        cache = "Redis at REDIS_URL" if settings.redis_url else "in-process cache"
        print(f"factbank up: ingest {ingest}, recall {recall} ({where}, {cache}). Ctrl-C stops.",
              flush=True)
        asyncio.run(run_services(settings, dsn))
    except KeyboardInterrupt:
        pass
    finally:
        if embedded is not None:
            embedded.stop()
            print("stopped embedded PostgreSQL", file=sys.stderr)
    return 0
