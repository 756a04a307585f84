"""The one error table of the web layer (`web._answer`): each exception, the status and detail
it is answered with. The bodies themselves are checked over HTTP in the integration tests
(test_bad_input*, test_outage); this pins the table, including the database-unreachable family
seen when Postgres stops under the services."""

from __future__ import annotations

import asyncpg
import pytest

from factbank import errors
from factbank.runtime.web import errors as web


@pytest.mark.parametrize(
    ("exc", "status", "detail"),
    [
        (errors.BadInput("body.x: too deep"), 400, "body.x: too deep"),
        (errors.NotFound("no fact 7"), 404, "no fact 7"),
        (errors.Conflict("bank 'a' already exists"), 409, "bank 'a' already exists"),
        (errors.Refused.one("quote", "empty"), 422, "refused: quote: empty"),
        (errors.BatchRefused([{"index": 0, "reasons": []}]), 422,
         "1 item(s) refused; nothing was stored"),
        (errors.Unavailable("embedder down"), 503, "embedder down"),
        (ValueError("unknown category 'x'"), 422, "unknown category 'x'"),
        (RecursionError("deep"), 400, "input nested too deeply"),
        (OverflowError("big"), 400, "invalid input value (OverflowError)"),
        (asyncpg.NumericValueOutOfRangeError("out of range"), 400,
         "invalid input value (NumericValueOutOfRangeError)"),
        (KeyError("bug"), 500, "internal error (logged)"),
        (asyncpg.InterfaceError("cannot call Connection.fetch: another operation is in progress"),
         500, "internal error (logged)"),
    ],
)
def test_each_error_has_one_status_and_detail(exc, status, detail):
    assert web._answer(exc) == (status, detail)


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.CannotConnectNowError("the database system is shutting down"),
        asyncpg.CrashShutdownError("terminating connection because of crash"),
        asyncpg.TooManyConnectionsError("sorry, too many clients already"),
        asyncpg.ConnectionFailureError("connection failure"),
        ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
        FileNotFoundError(2, "No such file or directory"),  # the Unix socket is gone
        OSError("Multiple exceptions: [Errno 111] Connect call failed"),
        TimeoutError(),  # a pool acquire or a statement that timed out
        asyncpg.InterfaceError("cannot perform operation: connection is closed"),
    ],
)
def test_the_database_unreachable_is_503_retry_and_names_no_address(exc):
    status, detail = web._answer(exc)
    assert (status, detail) == (503, "the database is unavailable; retry")
    assert "5432" not in detail and "/" not in detail


def test_an_error_raised_while_the_connection_was_lost_is_the_outage():
    # asyncpg: the transaction's __aexit__ fails on the closed connection while the
    # ConnectionDoesNotExistError of the statement is being handled.
    try:
        try:
            raise asyncpg.ConnectionDoesNotExistError("closed in the middle of operation")
        except asyncpg.ConnectionDoesNotExistError:
            raise asyncpg.InterfaceError(
                "cannot call Transaction.__aexit__(): the underlying connection is lost"
            ) from None
    except asyncpg.InterfaceError as exc:
        # `from None` hides the context from a traceback, not from __context__.
        assert web._answer(exc) == (503, "the database is unavailable; retry")
    try:
        try:
            raise KeyError("bug")
        except KeyError:
            raise RuntimeError("while handling a bug") from None
    except RuntimeError as exc:
        assert web._answer(exc)[0] == 500  # a context that is not an outage changes nothing
