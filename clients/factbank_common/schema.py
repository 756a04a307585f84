"""The wire contract's constants, in one place: where a fact comes from, who vouches for it,
and the limits the agent tools state.

Read by the server (`factbank.models` takes `SourceKind` and `Origin` from here), the CLI (the
`--source-kind` and `--origin` choices), the MCP server (its input schemas) and the Pi
extension (the installer writes these values into it, beside the tool texts).

Why the server imports this module of the client package, not the other way round: the light
client installs without the server extra and must not import server code, while every install
of this one distribution ships this file. It imports nothing but `typing` (a test holds it to
that), so the services depend on a list of words, never on client code. The alternative, a
copy on each side and a test that they agree, keeps the two copies this module removes.
"""

from __future__ import annotations

from typing import Literal, get_args

SourceKind = Literal["file", "url", "commit", "command", "user", "doc", "fact"]
Origin = Literal["user", "verified", "inferred"]

SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
ORIGINS: tuple[str, ...] = get_args(Origin)

# Writer questions a fact may carry; the server refuses more (`factbank.write.gate.
# MAX_QUESTIONS`, held equal by a test), so the agent tools say it in their schemas.
MAX_QUESTIONS = 6

# The agent tools' `search`: results by default and at most (the service allows more; an agent
# wants a few good facts, not a page).
SEARCH_LIMIT = 5
SEARCH_LIMIT_MAX = 20
