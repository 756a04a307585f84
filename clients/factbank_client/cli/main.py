"""`factbank`: one entry point, each group of commands in its own module.

Modules register their subcommands on the parser; a command is a function taking the parsed
arguments and returning an exit code. Server-side commands import the server code only when
they run, so the light client starts fast and works without the server extra.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = ("server", "admin", "login", "facts", "mcp_command", "install", "evals")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="factbank", description="A shared memory of verified facts for coding agents."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"factbank_client.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
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
