"""A dispatched run on the project's timeline (docs/timeline.md): its start and its end, with
the agent, the task and the outcome, through the client's `record_events`.

The events go into the harness's own session (its session id from the stream, as its hooks
name it), so a run whose hooks also record (`factbank install`) shows as one session: the
`session_start`/`session_end` keys (`start`, `end`) are the hooks' own and are stored once.
Until the harness says its id (its first line, in all three), or without one, the session is
`dispatch-<run id>`. The task and the outcome are `command` events of tool `dispatch`
(the timeline has no free-text kind, and a command with an exit code is what the outcome is):

    $ dispatch claude: fix the flaky retry test
    $ dispatch claude done: fix the flaky retry test  -> 0

Timeline texts are redacted by the server like every other string. Not logged in, or the
service down: the run goes on and its record says why it is not on the timeline.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

SESSION_WAIT = 15.0  # seconds to wait for the harness's session id before recording
TIMEOUT = 10.0


def _session(run: Any, session_id: str | None) -> Any:
    from factbank_client.history import Session

    return Session(session_id or f"dispatch-{run.id}", run.agent, run.repo)


def _send(run: Any, events: list[dict]) -> str:
    from factbank_client import config
    from factbank_client.client import Client
    from factbank_client.errors import FactbankError

    try:
        conf = config.load()
    except Exception as exc:  # a broken config must not end the run
        return f"not recorded: the client config is unreadable ({exc})"
    if not conf.tokens:
        return "not recorded: not logged in (factbank login)"
    try:
        with Client(conf, agent=run.agent, timeout=TIMEOUT) as client:
            out = client.record_events(events, timeout=TIMEOUT)
    except FactbankError as exc:
        return f"not recorded: {exc}"
    return f"recorded in the {out.get('bank')} bank"


def record_start(run: Any, session_id: str | None) -> str:
    s = _session(run, session_id)
    at = datetime.now(UTC)
    return _send(run, [s.start(at), s.command("dispatch:task", at,
                                               f"dispatch {run.agent}: {run.task}",
                                               "dispatch", None)])


def record_end(run: Any, session_id: str | None, outcome: tuple[str, int | None]) -> str:
    s = _session(run, session_id)
    at = datetime.now(UTC)
    status, code = outcome
    return _send(run, [s.command("dispatch:end", at, f"dispatch {run.agent} {status}: "
                                 f"{run.task}", "dispatch", code), s.end(at)])
