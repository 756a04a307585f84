"""`factbank`: one entry point; each group of commands registers itself through an entry point.

A group is a module with a `register(subparsers)` callable, named in the `factbank.commands`
entry-point group of pyproject.toml, as simonw/llm's plugins add their commands through
`register_commands`. The client's groups live in `factbank_client.cli`, the server's (`up`,
`migrate`, `serve`, `admin`) in `factbank.cli`, the evals' (`eval`, `bench`) in
`factbank_evals.cli`. setuptools writes entry points sorted by name, so `HELP_ORDER` keeps the
order `--help` has always shown (a new group not named there comes last).

Everything is one distribution, so a light client install (without the `server` extra) still
has the server's modules. A group whose extra is missing says so when it is imported, with
`require()` (`factbank_common.commands`), and is skipped: the light install lists only client
commands, its `--help` ends with a one-line hint naming the extra, and so does the error for a
command that is not there.
`require` looks the modules up without importing them: every command builds the whole parser,
and importing asyncpg, litestar and numpy there would cost each `factbank search` about half a
second (0.6 s by `python -X importtime` on the 2-core dev box, where `factbank --help` takes
0.4 s). Command functions take the parsed arguments, return an exit code and import the heavy
code only when they run.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from importlib.metadata import entry_points

from factbank_client.errors import UnsafePath
from factbank_common.commands import EXTRA_INSTALL, CommandError

COMMANDS_GROUP = "factbank.commands"
HELP_ORDER = ("server", "admin", "login", "facts", "mcp", "install", "eval", "timeline", "history",
              "staleness", "code", "queue", "enrich", "dispatch", "dashboard")


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command or choice (every subparser is
    made from this class too), and the missing extras' hint for an unknown command."""

    missing_hint = ""

    def error(self, message: str):  # type: ignore[override]
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2)) or [
                c.strip() for c in m.group(2).split(",")]
            close = difflib.get_close_matches(m.group(1), choices, n=2, cutoff=0.6)
            if close:
                message += "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
            if self.missing_hint:
                message += f"; {self.missing_hint}"
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
    """Shared option help where a command gave none, positionals shown in capitals (one
    spelling: `add CONTENT`, `get ID`), and a subcommand without a description gets its
    one-line help as one: `factbank X --help` never opens with nothing."""
    shared = {**SHARED_HELP, **ADMIN_HELP} if parser.prog.startswith("factbank admin") \
        else SHARED_HELP
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                text = helps.get(name) or ""
                if not sub.description and text:
                    sub.description = text[0].upper() + text[1:].rstrip(".") + "."
                _fill_help(sub)
        else:
            if action.help is None and action.dest in shared:
                action.help = shared[action.dest]
            if not action.option_strings and action.metavar is None and not action.choices:
                action.metavar = action.dest.upper()  # `factbank get ID`, as the docs write it


def command_groups() -> tuple[list, dict[str, str]]:
    """The `register` callables of the installed groups, and for each group left out its
    entry point's name and the extra it needs. A missing module of our own is a bug, not a
    light install: it raises."""
    registers, missing = [], {}
    rank = {name: i for i, name in enumerate(HELP_ORDER)}
    groups = sorted(entry_points(group=COMMANDS_GROUP),
                    key=lambda ep: (rank.get(ep.name, len(rank)), ep.name))
    for ep in groups:
        try:
            registers.append(ep.load())
        except ModuleNotFoundError as exc:
            if not exc.name or exc.name.partition(".")[0].startswith("factbank"):
                raise
            missing[ep.name] = getattr(exc, "extra", "server")
    if not registers and not missing:  # metadata older than the entry points, or none at all
        raise SystemExit(f"factbank: no {COMMANDS_GROUP} entry points are installed; "
                         "reinstall factbank (pip install -e . in a checkout)")
    return registers, missing


def _missing_hint(missing: dict[str, str]) -> str:
    """"the server, admin and eval commands need pip install 'factbank[server]'"."""
    if not missing:
        return ""
    names = list(missing)
    listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    extras = " and ".join(EXTRA_INSTALL.format(extra=e) for e in dict.fromkeys(missing.values()))
    return f"the {listed} commands need {extras}"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("factbank")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    registers, missing = command_groups()
    hint = _missing_hint(missing)
    parser = Parser(
        prog="factbank", description="A shared memory of verified facts for coding agents. "
        "Start with `factbank up` (server) and `factbank login` (client); "
        "`factbank COMMAND --help` explains each command.",
        epilog=f"Not installed here: {hint}." if hint else None,
    )
    parser.missing_hint = hint
    parser.add_argument("--version", action="version", version=f"factbank {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in registers:
        register(sub)
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
    except (CommandError, UnsafePath) as exc:  # UnsafePath: a file we will not read or write
        print(f"factbank: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # Run the canonical module's main: commands raise factbank_common.commands.CommandError,
    # which is not this __main__ module's class of the same name.
    from factbank_client.cli.main import main as _main

    sys.exit(_main())
