"""Facts that lack writer questions or tags, handed out in batches for an agent to fill in.

Facts that arrive by import, `migrate-native` or history backfill carry no questions, and on
the agent-memory eval bare facts recall at R@5 0.55-0.65 against 0.93 with tags and questions
(docs/principles.md#the-writer-bridges-the-words, #the-writer-asks-the-questions). The
writer is an LLM: an agent given the fact alone can write both.
This hands out the batch; the agent writes through the normal PATCH path
(`lifecycle.edit`: redacted, re-embedded, an `edited` event, audited). What that buys on the
eval: `python -m factbank_evals.enrich`.

Only facts worth a reader's time: active or disputed (not stale, retired or deleted), oldest
first, so a run of `factbank enrich` works through a backlog in order and `after` pages on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import asyncpg

from factbank.models import Fact
from factbank.store import facts

Lacking = Literal["questions", "tags", "either"]

_LACKS = {
    "questions": "cardinality(f.questions) = 0",
    "tags": "cardinality(f.tags) = 0",
    "either": "(cardinality(f.questions) = 0 OR cardinality(f.tags) = 0)",
}


async def batch(
    conn: asyncpg.Connection,
    bank_id: int,
    *,
    lacking: Lacking = "either",
    project: str | None = None,
    after: int = 0,
    limit: int = 20,
) -> tuple[list[Fact], int]:
    """Up to `limit` facts lacking what `lacking` names, after id `after`, and how many such
    facts the bank holds in all (after included)."""
    where = f"""WHERE f.bank_id = $1 AND f.status IN ('active', 'disputed')
                AND {_LACKS[lacking]} AND ($2::text IS NULL OR f.project = $2)"""
    rows = await conn.fetch(
        facts.FACT_SELECT + f" {where} AND f.id > $3 ORDER BY f.id LIMIT $4",
        bank_id, project, after, limit,
    )
    total = await conn.fetchval(f"SELECT count(*) FROM facts f {where}", bank_id, project)
    now = datetime.now(UTC)
    return [facts.to_fact(r, now) for r in rows], int(total)
