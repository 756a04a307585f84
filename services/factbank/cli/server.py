"""Server-side commands: `up` (the embedded default), `migrate`, `serve`.

Registered through the `factbank.commands` entry points; this package's `__init__` leaves
them out of a light client install. The store and the runner are imported when a command
runs, not when `factbank` builds its parser (they pull in asyncpg, litestar and numpy).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sys
from pathlib import Path

from factbank.settings import Settings
from factbank_common.commands import CommandError
from factbank_common.output import add_json_flag


def register(sub) -> None:
    p = sub.add_parser(
        "up", help="start Postgres (embedded unless DATABASE_URL) and both services",
        description="Start PostgreSQL (the embedded one in FACTBANK_HOME unless DATABASE_URL is "
                    "set), apply the migrations and run the ingest and recall services until "
                    "Ctrl-C. On the first run it creates your personal bank and prints its "
                    "token once. The URLs are printed once both services answer /readyz; "
                    "ports: FACTBANK_INGEST_PORT / FACTBANK_RECALL_PORT (8701/8702).")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser(
        "status", help="what `factbank up` runs: pids, ports, data dir, services' health",
        description="Show the `factbank up` of this FACTBANK_HOME: its pid, the ports and "
                    "readiness of both services (database and Redis checks), the embedded "
                    "PostgreSQL's pid and data dir, and the log file. Exit code 0: running "
                    "and ready; 1: something is wrong (printed); 3: not running.")
    add_json_flag(p)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser(
        "down", help="stop what `factbank up` started (from any terminal)",
        description="Stop the `factbank up` of this FACTBANK_HOME (as Ctrl-C in its terminal "
                    "would), then any embedded PostgreSQL it left running, and check by pid "
                    "that both are gone. Exit code 1 when something is still running.")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="seconds to wait for `up` to stop (default 60)")
    add_json_flag(p)
    p.set_defaults(func=cmd_down)
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


def _settings() -> Settings:
    """The settings, with a bad variable (FACTBANK_LOG=syslog, a port that is no number) as
    one line naming it, not a traceback."""
    try:
        return Settings.from_env()
    except ValueError as exc:
        raise CommandError(str(exc)) from None


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
    """A second `up` says one is already running instead of dying on "address in use", or
    instead of sharing the first one's data dir from other ports (`down` would then stop
    only one of them)."""
    from factbank.runtime import lifecycle

    state = lifecycle.read_state(settings.home) or {}
    if lifecycle.alive(state.get("pid"), state.get("started")):
        ports = state.get("ports") or {}
        raise CommandError(
            f"factbank up is already running for FACTBANK_HOME {settings.home} (pid "
            f"{state['pid']}, ports {ports.get('ingest')}/{ports.get('recall')}); use it, or "
            "stop it with `factbank down`. A second one needs its own FACTBANK_HOME.")
    ports = {"ingest": settings.ingest_port, "recall": settings.recall_port}
    seen = {name: _listener(settings.host, port) for name, port in ports.items()}
    if all(v is None for v in seen.values()):
        return
    urls = ", ".join(f"{name} http://{settings.host}:{ports[name]}" for name in ports)
    if "factbank" in seen.values():
        raise CommandError(
            f"factbank is already running ({urls}); use it, or stop it with Ctrl-C in its "
            "terminal or `factbank down` first. To run a second one, set "
            "FACTBANK_INGEST_PORT, FACTBANK_RECALL_PORT and FACTBANK_HOME.")
    busy = ", ".join(f"{ports[n]} ({n})" for n, v in seen.items() if v)
    raise CommandError(f"port {busy} is in use by another program; free it or choose other "
                       "ports with FACTBANK_INGEST_PORT / FACTBANK_RECALL_PORT")


def _banner(settings, where: str, created: tuple[str, str] | None,
            log_file: Path | None = None) -> str:
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
    lines += [f"A new token (a token is never shown again): {issue}"]
    if log_file is not None:
        lines += [f"Log (requests, startup; problems are shown here too): {log_file}"]
    lines += [f"factbank up: ingest {ingest}, recall {recall} ({where}, {cache}); both ready. "
              f"Ctrl-C stops (or `{fb} down` from another terminal; `{fb} status`)."]
    return "\n".join(lines)


def _say(text: str, *, err: bool = False) -> None:
    """Print, unless the terminal is gone (a closed window: writes fail with EIO, a reader
    that left: EPIPE); stopping must go on regardless."""
    try:
        print(text, file=sys.stderr if err else sys.stdout, flush=True)
    except OSError:
        pass


def cmd_up(args) -> int:
    settings = _settings()
    from factbank.observability import configure_logging
    from factbank.runtime import lifecycle
    from factbank.runtime.embedded import EmbeddedPostgres
    from factbank.runtime.runner import run_services

    _refuse_if_running(settings)
    lifecycle.handle_signals()
    lifecycle.watch_parent()
    log_file = configure_logging(settings)
    lifecycle.write_state(settings.home, host=settings.host, log=str(log_file or settings.log),
                          ports={"ingest": settings.ingest_port, "recall": settings.recall_port})
    embedded = None
    try:
        if settings.database_url:
            dsn = settings.database_url
            where = "DATABASE_URL"
            lifecycle.write_state(settings.home, database="DATABASE_URL", pgdata=None)
        else:
            embedded = EmbeddedPostgres(settings.home, settings.pg_shared_buffers)
            _say(f"starting embedded PostgreSQL in {embedded.pgdata} ...")
            dsn = embedded.start()
            if embedded.adopted:
                _say(f"(took over the PostgreSQL a stopped `factbank up` left running, "
                     f"pid {embedded.adopted}; it stops with this one)")
            where = f"embedded Postgres in {embedded.pgdata}"
            lifecycle.write_state(settings.home, database="embedded",
                                  pgdata=str(embedded.pgdata), postgres_pid=embedded.pid())
        applied = asyncio.run(_migrate(dsn))
        if applied:
            _say(f"applied migrations: {', '.join(applied)}")
        created = asyncio.run(_first_run(dsn))
        _say("starting the ingest and recall services ...")
        shown = []

        def ready() -> None:
            # Last, once both answer /readyz: after every startup log line.
            with contextlib.suppress(OSError):
                sys.stderr.flush()
            _say(_banner(settings, where, created, log_file))
            shown.append(True)

        try:
            asyncio.run(run_services(settings, dsn, on_ready=ready))
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        finally:
            lifecycle.handle_signals()  # the loop's handlers are gone: no default death now
            if created and not shown:  # never lose the only copy of a new token
                _say(f"\nthe services did not become ready; the personal bank '{created[0]}' "
                     f"was created and its token is: {created[1]}")
    except KeyboardInterrupt:  # Ctrl-C, or lifecycle.Stop for HUP/TERM/QUIT
        pass
    finally:
        # A second signal while stopping must not cut the stop short.
        for sig in lifecycle.STOP_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, signal.SIG_IGN)
        if embedded is not None:
            pid, gone = embedded.stop()
            if pid is None or gone:
                _say(f"stopped embedded PostgreSQL{f' (pid {pid})' if pid else ''}", err=True)
            else:
                holders = ", ".join(map(str, embedded.holders())) or "none"
                _say(f"embedded PostgreSQL (pid {pid}) is still running (other processes "
                     f"using it: {holders}); `factbank down` stops it", err=True)
        lifecycle.clear_state(settings.home, os.getpid())
    return 0


def _health(host: str, port: int) -> dict:
    """What a service answers on /healthz and /readyz (`readyz` names the database and
    Redis checks)."""
    import httpx

    probe = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
    base = f"http://{f'[{probe}]' if ':' in probe else probe}:{port}"
    out: dict = {"url": base}
    try:
        r = httpx.get(f"{base}/readyz", timeout=3)
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") \
            else {}
        out.update(ready=r.status_code == 200, checks={k: v for k, v in body.items()
                                                         if k != "status"})
    except (httpx.HTTPError, ValueError) as exc:
        out.update(ready=False, error=type(exc).__name__)
    return out


def status_report(settings) -> tuple[dict, int]:
    """What runs for this FACTBANK_HOME and whether it is healthy; exit code 0 when `up` runs
    and both services are ready, 1 when something is wrong (an orphaned Postgres, a service
    not ready), 3 when nothing runs (the LSB code for "not running")."""
    from factbank.runtime import lifecycle

    r = lifecycle.running(settings.home)
    report = r.as_dict()
    ports = r.state.get("ports") or {"ingest": settings.ingest_port,
                                     "recall": settings.recall_port}
    host = r.state.get("host") or settings.host
    report["services"] = {name: {"port": port, **_health(host, port)}
                          for name, port in ports.items()}
    answering = any(s["ready"] or "checks" in s for s in report["services"].values())
    healthy = r.up_alive and all(s["ready"] for s in report["services"].values())
    problems = []
    if r.orphaned:
        problems.append(f"PostgreSQL pid {r.postgres_pid} runs with no factbank up holding it "
                        "(a killed `up` left it): `factbank down` stops it")
    if r.up_alive and not healthy:
        problems.append("a service is not ready (see above; the log: "
                        f"{r.state.get('log')})")
    if not r.up_alive and answering:
        problems.append("services answer on these ports, but not from a `factbank up` of this "
                        f"FACTBANK_HOME ({settings.home})")
    report["problems"] = problems
    code = 0 if healthy and not problems else (1 if problems or r.up_alive else 3)
    report["running"] = r.up_alive
    return report, code


def cmd_status(args) -> int:
    report, code = status_report(_settings())
    if args.json:
        print(json.dumps(report, indent=2))
        return code
    up = report["up"]
    if up["running"]:
        print(f"factbank up: running, pid {up['pid']} (since {report.get('since') or '?'})")
    else:
        print(f"factbank up: not running (FACTBANK_HOME {report['home']})")
    for name, svc in report["services"].items():
        state = "ready" if svc["ready"] else ("not ready" if "checks" in svc else "not answering")
        checks = ", ".join(f"{k} {v}" for k, v in (svc.get("checks") or {}).items())
        print(f"  {name:<7} {svc['url']}  {state}{f' ({checks})' if checks else ''}")
    pg = report["postgres"]
    if pg["data_dir"]:
        running = f"pid {pg['pid']}" if pg["pid"] else "not running"
        print(f"  postgres embedded, {running}, data {pg['data_dir']}")
    elif report.get("database") == "DATABASE_URL":
        print("  postgres DATABASE_URL (not managed by up)")
    if report.get("log") and up["running"]:
        print(f"  log     {report['log']}")
    for problem in report["problems"]:
        print(f"problem: {problem}")
    return code


def cmd_down(args) -> int:
    from factbank.runtime import lifecycle

    settings = _settings()
    result = lifecycle.down(settings.home, timeout=args.timeout)
    code = 1 if result["running"] else 0
    if args.json:
        print(json.dumps(result, indent=2))
        return code
    if not result["stopped"] and not result["running"]:
        print(f"factbank is not running (FACTBANK_HOME {result['home']})")
    for item in result["stopped"]:
        print(f"stopped {item['what']} (pid {item['pid']})")
    for item in result["running"]:
        print(f"still running: {item['what']} (pid {item['pid']})", file=sys.stderr)
    return code
