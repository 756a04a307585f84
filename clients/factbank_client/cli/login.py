"""`factbank login`: store a bank's token (and the service URLs) in the client config.

What is saved is exactly what was checked: the ingest URL, the recall URL (given, kept from the
config, or the ingest port + 1) and the token, each URL asked with the token before saving.
"""

from __future__ import annotations

from factbank_client import config as client_config
from factbank_client.cli.main import CommandError
from factbank_client.client import INGEST, RECALL, Client, FactbankError


def register(sub) -> None:
    p = sub.add_parser("login", help="save the service URLs and a bank's token (checked first)",
                       description="Save a bank's token and the two services' URLs in this "
                       "machine's client config, after asking both services whether they "
                       "accept it. Run it once for your personal bank and once with --bank "
                       "team for a team bank's token.")
    p.add_argument("--url", default=None,
                   help=f"the ingest service (default: the configured one, else "
                        f"{client_config.DEFAULT_URL})")
    p.add_argument("--recall-url",
                   help="the recall service (default: the configured one when --url is not "
                        "given, else the --url port + 1)")
    p.add_argument("--token", required=True, help="the token `factbank up` or an admin gave you")
    p.add_argument("--bank", default=client_config.PERSONAL,
                   choices=[client_config.PERSONAL, client_config.TEAM],
                   help="which of your banks this token is for: personal or team "
                        "(default: personal)")
    p.add_argument("--no-check", action="store_true",
                   help="save without asking the services whether the token works")
    p.set_defaults(func=cmd_login)


def _check(client: Client, bank: str) -> list[str]:
    """Ask both services with the token; returns the problems that did not refuse the token
    (unreachable, ...). A 401/403 from either is a CommandError: nothing is saved."""
    problems = []
    calls = ((INGEST, client.config.url, "/v1/facts/0", {}),
             (RECALL, client.config.recall_url, "/v1/facts", {"limit": 1}))
    for service, base, path, params in calls:
        try:
            client.request("GET", service, path, bank, params=params)
        except FactbankError as exc:
            if exc.status == 404 and service is INGEST:
                continue  # the token was accepted; fact 0 just does not exist
            if exc.status in (401, 403):
                raise CommandError(f"not saved: {service.name} at {base} refused the token: "
                                   f"{exc}") from None
            problems.append(str(exc))
    return problems


def cmd_login(args) -> int:
    current = client_config.load()
    url = (args.url or current.url).rstrip("/")
    # A new ingest URL without --recall-url: its recall service is the next port (derived by
    # ClientConfig), never the one saved for the old URL.
    recall_url = args.recall_url or ("" if args.url else current.recall_url)
    cfg = client_config.ClientConfig(url=url, recall_url=recall_url,
                                     tokens={args.bank: args.token})
    checked = ""
    if not args.no_check:
        with Client(cfg) as client:
            problems = _check(client, args.bank)
        if problems:
            checked = ("; could not check it: " + "; ".join(problems)
                       + "\n  (saved anyway; is `factbank up` running there? "
                         "Run login again with the right --url/--recall-url)")
        else:
            checked = f"; {cfg.url} and {cfg.recall_url} accept it"
    path = client_config.save_login(cfg.url, args.token, args.bank, recall_url=cfg.recall_url)
    print(f"saved the {args.bank} bank's token in {path}{checked}")
    return 0
