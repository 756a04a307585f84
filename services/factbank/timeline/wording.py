"""A conflict and how it is worded: the file, who, which agent, on which machine, how long ago,
and the branch, marked when it differs from this session's."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from factbank_common import output


@dataclass(frozen=True)
class Conflict:
    path: str
    member: str
    agent: str
    machine: str
    branch: str
    other_branch: bool  # the other session is on a different branch than this one
    seconds_ago: int
    session: str
    for_session: str = ""  # the session whose event ran into it (its harness session id)
    other_id: int | None = None  # the session row of `session`: told in its next prompt

    def warning(self) -> str:
        return conflict_warning(self)



def ago(seconds: float) -> str:
    return output.ago(seconds, ("s", " min", " h", " d"))


def conflict_warning(c: Conflict) -> str:
    who = c.member or "someone"
    where = f" on {c.machine}" if c.machine else ""
    branch = c.branch or "?"
    mark = f" (a DIFFERENT branch: {branch})" if c.other_branch else f" (branch {branch})"
    return (
        f"{c.path} was also touched by {who} with {c.agent or 'an agent'}{where} "
        f"{ago(c.seconds_ago)}{mark}"
    )



class ConflictOut(msgspec.Struct, kw_only=True):
    session_id: str  # the session whose event ran into it
    path: str
    member: str
    agent: str
    machine: str
    branch: str
    other_branch: bool
    seconds_ago: int
    warning: str


def conflict_out(c: Conflict) -> ConflictOut:
    return ConflictOut(
        session_id=c.for_session,
        path=c.path,
        member=c.member,
        agent=c.agent,
        machine=c.machine,
        branch=c.branch,
        other_branch=c.other_branch,
        seconds_ago=c.seconds_ago,
        warning=c.warning(),
    )
