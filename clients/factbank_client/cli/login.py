"""`factbank login`: store a bank's token (and the service URLs) in the client config.

What is saved is exactly what was checked: the ingest URL, the recall URL (given, kept from the
config, or the ingest port + 1) and the token, each URL normalised (`config.normalize_url`) and
asked with the token before saving. A check that fails saves nothing and exits 2 (a
wrong port overwrote a working config "(saved anyway…)" and exited 0); `--force` saves it
anyway, and `--no-check` never replaces a config that works unless `--force` is given too.
"""

from __future__ import annotations

import sys

import httpx

from factbank_client import config as client_config
from factbank_client.client import INGEST, RECALL, Client
from factbank_client.errors import FactbankError
from factbank_common.commands import CommandError
from factbank_common.inert import inert
from factbank_common.output import add_json_flag, print_json

HINT = ("Is `factbank up` running there (`factbank status`), and are the URLs right? "
        "`--force` saves it anyway")


def register(sub) -> None:
    p = sub.add_parser("login", help="save the service URLs and a bank's token (checked first)",
                       description="Save a bank's token and the two services' URLs in this "
                       "machine's client config, after asking both services whether they "
                       "accept it. Run it once for your personal bank and once with --bank "
                       "team for a team bank's token. Nothing is saved when the check fails "
                       "(exit code 2) unless --force.")
    p.add_argument("--url", default=None,
                   help=f"the ingest service, e.g. 127.0.0.1:8701 or https://fb.example.com "
                        f"(http:// is added when no scheme is given; default: the configured "
                        f"one, else {client_config.DEFAULT_URL})")
    p.add_argument("--recall-url",
                   help="the recall service (default: the configured one when --url is not "
                        "given, else the --url port + 1)")
    p.add_argument("--token", required=True, help="the token `factbank up` or an admin gave you")
    p.add_argument("--bank", default=client_config.PERSONAL,
                   choices=[client_config.PERSONAL, client_config.TEAM],
                   help="which of your banks this token is for: personal or team "
                        "(default: personal)")
    p.add_argument("--no-check", action="store_true",
                   help="save without asking the services (refused when it would replace a "
                        "working config, unless --force)")
    p.add_argument("--force", action="store_true",
                   help="save even when the check fails or the current config works")
    add_json_flag(p)
    p.set_defaults(func=cmd_login)


def _factbank_at(base: str, name: str) -> str | None:
    """None when a factbank service answers /healthz at `base`, else why not (one line)."""
    try:
        r = httpx.get(f"{base}/healthz", timeout=3)
    except httpx.TimeoutException:
        return f"{name} at {base}: no answer within 3 s"
    except httpx.HTTPError as exc:
        why = str(exc).rstrip(".") or type(exc).__name__
        return f"{name} at {base}: cannot connect ({why})"
    try:
        if r.status_code == 200 and r.json().get("status") == "ok":
            return None
    except (ValueError, AttributeError):
        pass
    return f"{name} at {base}: not a factbank service (GET /healthz answered {r.status_code})"


def verify(cfg: client_config.ClientConfig, bank: str) -> list[str]:
    """Ask both services whether they are factbank and accept `bank`'s token; returns the
    problems, one line each (empty: it works)."""
    problems = []
    calls = ((INGEST, cfg.url, "/v1/facts/0", {}),
             (RECALL, cfg.recall_url, "/v1/facts", {"limit": 1}))
    with Client(cfg) as client:
        for service, base, path, params in calls:
            down = _factbank_at(base, service.name)
            if down:
                problems.append(down)
                continue
            try:
                client.request("GET", service, path, bank, params=params)
            except FactbankError as exc:
                if exc.status == 404 and service is INGEST:
                    continue  # the token was accepted; fact 0 just does not exist
                if exc.status in (401, 403):
                    problems.append(f"{service.name} at {base} refused the token "
                                    f"({exc.status} {exc.message.split('. ')[0]})")
                else:
                    problems.append(f"{service.name} at {base}: {exc.message}")
    return problems


def _kind_mismatch(cfg: client_config.ClientConfig, label: str) -> str | None:
    """The token's bank is a team bank saved as `personal` (or a personal one saved as
    `team`): writes would then go where the member does not expect (a member's
    team token saved without --bank stored their facts "in personal"). None when they agree
    or the server cannot say."""
    try:
        with Client(cfg) as client:
            who = client.request("GET", RECALL, "/v1/whoami", label).json()
    except (FactbankError, ValueError):
        return None
    kind = who.get("kind") if isinstance(who, dict) else None
    if kind not in (client_config.PERSONAL, client_config.TEAM) or kind == label:
        return None
    return (f"this token belongs to the {kind} bank {inert(str(who.get('bank')), 100)!r} but "
            f"is saved as your {label} bank, so writes meant for your {label} bank go there; "
            f"`factbank login --bank {kind} --token ...` saves it as your {kind} bank")


def _urls(args, current: client_config.ClientConfig) -> tuple[str, str]:
    try:
        url = (client_config.normalize_url(args.url, "--url") if args.url is not None
               else current.url)
        if args.recall_url is not None:
            recall = client_config.normalize_url(args.recall_url, "--recall-url")
        else:
            # A new ingest URL without --recall-url: its recall service is the next port
            # (derived by ClientConfig), never the one saved for the old URL.
            recall = "" if args.url is not None else current.recall_url
    except ValueError as exc:
        raise CommandError(f"not saved: {exc}") from None
    return url, recall


def cmd_login(args) -> int:
    current = client_config.load()
    url, recall_url = _urls(args, current)
    cfg = client_config.ClientConfig(url=url, recall_url=recall_url,
                                     tokens={args.bank: args.token})
    checked = not args.no_check
    problems = verify(cfg, args.bank) if checked else []
    if problems and not args.force:
        raise CommandError("not saved: " + "; ".join(problems) + f". {HINT}")
    if args.no_check and not args.force and args.bank in current.tokens \
            and not verify(current, args.bank):
        raise CommandError(f"not saved: the {args.bank} bank's current config works "
                           f"({current.url}, {current.recall_url}); --no-check would replace "
                           "it unchecked. Drop --no-check, or add --force")
    path = client_config.save_login(cfg.url, args.token, args.bank, recall_url=cfg.recall_url)
    for problem in problems:
        print(f"factbank: warning: {problem} (saved anyway: --force)", file=sys.stderr)
    mislabelled = _kind_mismatch(cfg, args.bank) if checked and not problems else None
    if mislabelled:
        print(f"factbank: warning: {mislabelled}", file=sys.stderr)
    if args.json:
        print_json({"saved": str(path), "bank": args.bank, "url": cfg.url,
                    "recall_url": cfg.recall_url, "checked": checked and not problems,
                    "problems": problems, "warning": mislabelled})
        return 0
    how = (f"; {cfg.url} and {cfg.recall_url} accept it" if checked and not problems
           else "; not checked" if not checked else "; the check failed (see above)")
    print(f"saved the {args.bank} bank's token in {path}{how}")
    return 0
