"""Every error the domain raises, each carrying its HTTP status (and, where one is to blame, the
field), in one hierarchy, in the style of httpx's `_exceptions.py`.

    FactbankError
    ├── BadInput       400  a value no route can store: a NUL, an int beyond int64, deep nesting
    ├── NotFound       404  a bank, member, token or fact that does not exist for the caller
    ├── Conflict       409  the thing already exists
    ├── Refused        422  the write gate (or a rule) refused: `reasons` = [{field, reason}]
    ├── BatchRefused   422  items of a batch were refused; nothing was stored: `errors`
    └── Unavailable    503  the database (or another backend) cannot be reached right now

The web layer maps them with one table (`runtime/web/errors.py`), never an isinstance chain, and
the core raises them without knowing about HTTP beyond the number. `reason()` is the one
constructor of the {field, reason} items every refusal lists.
"""

from __future__ import annotations

from collections.abc import Iterable


def reason(field: str, text: str) -> dict[str, str]:
    """One refusal item: which field, and why (the shape every 422 lists)."""
    return {"field": field, "reason": text}


class FactbankError(Exception):
    """Base of every domain error; `status` is the HTTP status the web layer answers with."""

    status: int = 500


class BadInput(FactbankError, ValueError):
    """A request value no route can store: a NUL, an integer beyond int64, nesting too deep."""

    status = 400


class NotFound(FactbankError, LookupError):
    """A bank, member, token or fact does not exist (or is not visible to the caller)."""

    status = 404


class Conflict(FactbankError, ValueError):
    """The thing already exists."""

    status = 409


class Refused(FactbankError, ValueError):
    """Refused by the write gate or a rule: `reasons` lists each problem as {field, reason}."""

    status = 422

    def __init__(self, reasons: Iterable[dict[str, str]]) -> None:
        self.reasons = list(reasons)
        super().__init__("; ".join(f"{r['field']}: {r['reason']}" for r in self.reasons))

    @classmethod
    def one(cls, field: str, text: str) -> Refused:
        """A refusal with a single reason: `raise Refused.one("reason", "say why")`."""
        return cls([reason(field, text)])

    @property
    def field(self) -> str | None:
        return self.reasons[0]["field"] if self.reasons else None


class BatchRefused(FactbankError, ValueError):
    """Some items of a batch were refused; nothing was stored. `errors` has index + reasons."""

    status = 422

    def __init__(self, errors: list[dict]) -> None:
        self.errors = errors
        super().__init__(f"{len(errors)} item(s) refused; nothing was stored")


class Unavailable(FactbankError):
    """A backend the request needs (the database) cannot be reached: retry later."""

    status = 503
