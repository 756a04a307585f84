"""The caller of a route that does not write a fact: its principal with the agent header
cleaned, and the bank's redaction policy. Its own module, so the routers beside the app
(the review queue's) import it without importing the app."""

from __future__ import annotations

import asyncio
import dataclasses

from factbank.redact import redaction
from factbank.store.banks import Principal
from factbank.write.deps import Deps


async def caller(deps: Deps, user: Principal) -> tuple[Principal, str]:
    """The request's principal with its agent (the X-Factbank-Agent header) cleaned, and the
    bank's redaction policy (read with the token). Routes that write a fact do not call it:
    the write gate cleans the header with the fact."""
    policy = user.redaction_policy
    if user.agent:
        agent = await asyncio.to_thread(
            redaction.clean_text, "X-Factbank-Agent", user.agent, policy
        )
        user = dataclasses.replace(user, agent=agent)
    return user, policy
