"""`factbank`: one entry point, each group of commands in its own module.

Modules register their subcommands on the parser; a command is a function taking the parsed
arguments and returning an exit code. Server-side commands import the server code only when
they run, so the light client starts fast and works without the server extra.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys

COMMAND_MODULES = ("server", "admin", "login", "facts", "mcp_command", "install", "evals",
                   "timeline", "history")


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command or choice (every subparser is
    made from this class too)."""

    def error(self, message: str):  # type: ignore[override]
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2)) or [
                c.strip() for c in m.group(2).split(",")]
            close = difflib.get_close_matches(m.group(1), choices, n=2, cutoff=0.6)
            if close:
                message += "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
        super().error(message)


# Help for options and arguments that many commands share, where a command gave none.
SHARED_HELP = {
    "bank": "which of your configured banks: personal or team (default: personal; reads "
            "ask every bank)",
    "id": "a fact's id (as `search` and `get` show it, e.g. 12)",
    "json": "print JSON instead of a table",
}


ADMIN_HELP = {"bank": "the bank's name on the server (`factbank admin bank list`)"}


def _fill_help(parser: argparse.ArgumentParser) -> None:
    shared = {**SHARED_HELP, **ADMIN_HELP} if parser.prog.startswith("factbank admin") \
        else SHARED_HELP
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _fill_help(sub)
        elif action.help is None and action.dest in shared:
            action.help = shared[action.dest]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="factbank", description="A shared memory of verified facts for coding agents. "
        "Start with `factbank up` (server) and `factbank login` (client); "
        "`factbank COMMAND --help` explains each command."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"factbank_client.cli.{name}").register(sub)
    _fill_help(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:  # a bare `factbank` (or a group without action)
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe surfaces here, inside the handler below
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `factbank export | head`: the reader left. Quietly, like other Unix tools; point
        # stdout at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141
    except CommandError as exc:
        print(f"factbank: {exc}", file=sys.stderr)
        return 2


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit code 2, no traceback."""


if __name__ == "__main__":
    # Run the canonical module's main: commands raise factbank_client.cli.main.CommandError,
    # which is not this __main__ module's class of the same name.
    from factbank_client.cli.main import main as _main

    sys.exit(_main())
