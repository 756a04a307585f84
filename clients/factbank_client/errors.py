"""Every exception the client raises, in one place: a failed call to the services
(`FactbankError`), and why an install, a proposal, a migration, a dispatch, a path or a hook's
HTTP call could not go on. The CLI prints each as one line (`factbank_client.cli.main`)."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s, and Sequence only for the checker: the hooks import
if TYPE_CHECKING:  # this module, and `collections.abc` loads `collections` (~1.5 ms)
    from collections.abc import Sequence


class FactbankError(Exception):
    """A failed call: the server's own message, with every reason it gave, on one line."""

    def __init__(self, message: str, *, status: int | None = None,
                 reasons: Sequence[dict] = (), errors: Sequence[dict] = (),
                 bank: str | None = None) -> None:
        self.message = message
        self.status = status
        self.reasons = list(reasons)
        self.errors = list(errors)
        self.bank = bank
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.message
        detail = self.message
        reasons = [f"{r.get('field', '?')}: {r.get('reason', '')}" for r in self.reasons]
        # The server already joins the reasons into `detail`; only add what is missing.
        missing = [r for r in reasons if r not in detail]
        if missing:
            text += " (" + "; ".join(missing) + ")"
        for err in self.errors:
            why = "; ".join(f"{r.get('field', '?')}: {r.get('reason', '')}"
                            for r in err.get("reasons", []))
            where = f"line {err['line']}" if "line" in err else f"item {err.get('index', '?')}"
            text += f"\n  {where}: {why}"
        if self.status:
            text = f"{self.status} {text}"
        if self.bank:
            text = f"[{self.bank}] {text}"
        return text


class QuoteNotFound(FactbankError):
    """The quote is not in the file the fact cites: the fact would be unverifiable."""


class MigrateError(Exception):
    """Why nothing could be proposed (one line for the CLI)."""


class ProposeError(Exception):
    """Why no proposal was written (one line for the CLI)."""


class InstallError(Exception):
    """A file we must not or cannot edit (unparsable, or someone else's): nothing written."""


class TextEditFailed(Exception):
    """The text edit would not give the intended document; use a structural edit."""


class GitInstallError(Exception):
    pass


class UnsafePath(ValueError):
    """A path factbank will not read or write; the message names it and says why."""


class DispatchError(ValueError):
    """A run that cannot start (unknown agent, no binary, no such repository): the message
    names what is wrong."""


class HttpError(Exception):
    """Any failure: network, timeout, non-2xx status, or a body that is not JSON."""
