"""The command kit every `factbank` command group uses, the client's and the server's alike:
the one-line user-facing error, and `require`, which leaves a group out when its extra is not
installed (see `factbank_client.cli.main`)."""

from __future__ import annotations

import importlib.util

EXTRA_INSTALL = "pip install 'factbank[{extra}]'"


class MissingExtra(ModuleNotFoundError):
    """A command group's extra is not installed: the group is left out of `factbank`."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(f"No module named {module!r}: {EXTRA_INSTALL.format(extra=extra)}",
                         name=module)
        self.extra = extra


def require(extra: str, *modules: str) -> None:
    """At the top of a command group's module: raise MissingExtra unless every one of
    `modules` (top-level import names of `extra`'s packages) is installed. Nothing is
    imported."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(extra, module)


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit code 2, no traceback."""
