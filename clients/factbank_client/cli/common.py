"""What the commands that call the services share: a client over the configured banks, a
service's refusal as a one-line `CommandError`, the project a command is about, and the
`--json` switch between the answer for scripts and the text for people (factbank_client/
render.py writes that text)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from factbank_client import config as client_config
from factbank_client.client import Client
from factbank_client.errors import FactbankError
from factbank_client.project import project_key
from factbank_common.commands import CommandError
from factbank_common.inert import inert_lines
from factbank_common.output import add_json_flag, print_json

T = TypeVar("T")

PROJECT_HELP = "project key (default: this repository's)"
# What `config.write_bank` does, said once for every command that writes a new fact.
WRITE_BANK_HELP = (
    "which of your configured banks (personal or team, as `factbank login --bank` saved "
    "them). Default: personal; a category listed in `team_categories` in the config goes to "
    "team (none is, unless you list it). The answer names the bank and who can read it")


def add_handoff_to_option(p) -> None:
    """`--to AGENT` of `handoff` and `dispatch handoff`: the same names in both. claude-code is
    Claude Code's MCP name, which the server files under claude."""
    from factbank_client.dispatch import AGENTS

    p.add_argument("--to", dest="to_agent", choices=(*AGENTS, "claude-code"),
                   help="only a session of this agent receives it: claude (or claude-code), "
                        "codex or pi")


@contextmanager
def command(sub, name: str, func: Callable, *, fact: bool = False, json: bool = True,
            **parser: Any) -> Iterator[Any]:
    """Declare subcommand `name` running `func`: the `with` body adds its own arguments
    between what every such command has. With `fact`, it is about one fact: its `id` comes
    first and `--bank` (which bank holds it) after the body's options; then `--json`."""
    p = sub.add_parser(name, **parser)
    if fact:
        p.add_argument("id", type=int)
    yield p
    if fact:
        p.add_argument("--bank")
    if json:
        add_json_flag(p)
    p.set_defaults(func=func)


def client() -> Client:
    return Client(client_config.load())


def call(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """`fn(*args, **kw)`, with a FactbankError (the server's refusal, every reason on one
    line) raised as a CommandError: exit code 2, no traceback."""
    try:
        return fn(*args, **kw)
    except FactbankError as exc:
        raise CommandError(str(exc)) from None


def add_project_option(p) -> None:
    p.add_argument("--project", help=PROJECT_HELP)


def project(args) -> str | None:
    """`--project`, else this repository's key; None with `--global` or outside a repo."""
    if getattr(args, "no_project", False):
        return None
    return args.project or project_key(Path.cwd())


def bank_notes(notes: Mapping[str, str] | None, what: str) -> None:
    """What happened to some banks on the way (a degraded search, a bank skipped), on stderr:
    `factbank: <bank><what>: <why>`, one line each."""
    for bank, why in (notes or {}).items():
        print(inert_lines(f"factbank: {bank}{what}: {why}"), file=sys.stderr)


def show(args, data: Any, lines: Callable[[], Iterable[str]]) -> int:
    """`--json`: the service's answer; else the lines for people. Exit code 0."""
    if args.json:
        print_json(data)
    else:
        for line in lines():
            print(inert_lines(line))  # render's lines are inert already; this is the net
    return 0
