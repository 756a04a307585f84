"""`factbank login`: store a bank's token (and the service URLs) in the client config."""

from __future__ import annotations

from factbank_client import config as client_config
from factbank_client.cli.main import CommandError
from factbank_client.client import RECALL, Client, FactbankError


def register(sub) -> None:
    p = sub.add_parser("login", help="save the service URL and a bank's token")
    p.add_argument("--url", default=None,
                   help=f"the ingest service (default: the configured one, else "
                        f"{client_config.DEFAULT_URL})")
    p.add_argument("--recall-url", help="the recall service (default: the next port)")
    p.add_argument("--token", required=True, help="the token `factbank up` or an admin gave you")
    p.add_argument("--bank", default=client_config.PERSONAL,
                   choices=[client_config.PERSONAL, client_config.TEAM])
    p.add_argument("--no-check", action="store_true",
                   help="save without asking the recall service whether the token works")
    p.set_defaults(func=cmd_login)


def cmd_login(args) -> int:
    current = client_config.load()
    url = (args.url or current.url).rstrip("/")
    recall_url = args.recall_url or (None if args.url else current.recall_url)
    cfg = client_config.ClientConfig(url=url, recall_url=recall_url or "",
                                     tokens={args.bank: args.token})
    checked = ""
    if not args.no_check:
        with Client(cfg) as client:
            try:
                client.request("GET", RECALL, "/v1/facts", args.bank, params={"limit": 1})
                checked = f"; {cfg.recall_url} accepts it"
            except FactbankError as exc:
                if exc.status in (401, 403):
                    raise CommandError(f"not saved: {exc}") from None
                checked = f"; could not check it ({exc})"
    path = client_config.save_login(url, args.token, args.bank, recall_url=recall_url)
    print(f"saved the {args.bank} bank's token in {path}{checked}")
    return 0
