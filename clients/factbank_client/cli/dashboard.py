"""`factbank dashboard`: the local web dashboard (clients/factbank_client/dashboard/).

It serves on 127.0.0.1 only and opens the browser at a URL carrying a random per-launch
token (the Jupyter way: the token becomes an HttpOnly, SameSite=Strict cookie; see
dashboard/security.py). Litestar and uvicorn are imported when the command runs, never when
`factbank` builds its parser (each command pays for the whole parser)."""

from __future__ import annotations

import sys
import webbrowser

from factbank_common.commands import CommandError

DEFAULT_PORT = 8765


def register(sub) -> None:
    p = sub.add_parser(
        "dashboard", help="open the local web dashboard: facts, timeline, health, banks",
        description="Serve the dashboard on 127.0.0.1 and open it in the browser. It talks to "
        "the services with this machine's configured tokens (personal and team banks), and "
        "only a browser holding this launch's token gets in (it is in the URL printed).")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"loopback port (default {DEFAULT_PORT}; 0: any free port)")
    p.add_argument("--no-browser", action="store_true",
                   help="print the URL instead of opening a browser")
    p.set_defaults(func=cmd_dashboard)


def launch_url(port: int, token: str, path: str = "/facts") -> str:
    return f"http://127.0.0.1:{port}{path}?token={token}"


def cmd_dashboard(args) -> int:
    import socket

    import uvicorn

    from factbank_client import config as client_config
    from factbank_client.dashboard import app as dashboard_app
    from factbank_client.dashboard.security import Secrets

    config = client_config.load()
    if not config.tokens:
        raise CommandError("no bank configured: run `factbank login --url URL --token TOKEN`")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", args.port))
    except OSError as exc:
        raise CommandError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror}; "
                           "pass --port N (0: any free port)") from None
    port = sock.getsockname()[1]
    keys = Secrets()
    asgi = dashboard_app.create(config, keys, port)
    url = launch_url(port, keys.launch)
    print(f"factbank dashboard on http://127.0.0.1:{port}/ (Ctrl-C stops it)", file=sys.stderr)
    print(f"open: {url}", file=sys.stderr)
    if not args.no_browser:
        webbrowser.open(url)
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
    return 0
