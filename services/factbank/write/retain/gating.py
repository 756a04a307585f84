"""Retain's first step: a batch through the write gate under the bank's redaction policy and
category registry (derived facts' citations included), then embedded, outside any
transaction. `check` and `lifecycle` run the same step (`gated`), never a copy."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
import numpy as np

from factbank.errors import Refused
from factbank.models import NewFact
from factbank.store.banks import Principal
from factbank.text import embedder, lexicon
from factbank.write import derived, gate
from factbank.write.deps import Deps
from factbank.write.gate import Prepared


def model_name(deps: Deps) -> str | None:
    return deps.embedder.name if deps.embedder is not None else None


@dataclass
class Vectors:
    """A prepared fact's vectors: its own (content + tags) and one per writer question."""

    fact: np.ndarray | None = None
    questions: list[np.ndarray] = field(default_factory=list)


async def embed_fact(
    conn: asyncpg.Connection, model: embedder.Embedder, items: Sequence[tuple[str, Sequence[str]]]
) -> list[Vectors]:
    """Embed facts given as (own text, questions) in ONE embedder call: the own texts and every
    question batched together (a single add with four questions costs one forward pass)."""
    texts = [text for text, _ in items] + [q for _, questions in items for q in questions]
    vectors = await embedder.embed_passages(conn, model, texts) if texts else []
    out, at = [], len(items)
    for i, (_, questions) in enumerate(items):
        out.append(Vectors(vectors[i], list(vectors[at : at + len(questions)])))
        at += len(questions)
    return out



def _gate_all(
    items: Sequence[NewFact],
    max_chars: int,
    policy: str,
    agent: str,
    categories: set[str],
    cited: dict[int, tuple[str, str]] | None = None,
) -> tuple[list[Prepared | None], list[dict]]:
    prepared: list[Prepared | None] = []
    errors: list[dict] = []
    for i, item in enumerate(items):
        try:
            p = gate.check(item, max_chars=max_chars, policy=policy, agent=agent)
            if p.category not in categories:
                known = ", ".join(sorted(categories))
                raise Refused.one("category", f"unknown category {p.category!r}; known: {known}")
            restoring = getattr(item, "restore", None) is not None  # an exported fact
            if p.cites and (why := gate.check_citations(p, cited or {}, restoring=restoring)):
                raise Refused(why)
            prepared.append(p)
        except Refused as exc:
            prepared.append(None)
            errors.append({"index": i, "reasons": exc.reasons})
    return prepared, errors


async def gated(
    conn: asyncpg.Connection, deps: Deps, principal: Principal, items: Sequence[NewFact]
) -> tuple[list[Prepared | None], list[dict]]:
    """The write gate for a batch, under the bank's redaction policy and category registry.
    The gate (redaction above all) is CPU work: in a thread, so a large import never holds
    the event loop that both services' other callers share."""
    rows = await conn.fetch("SELECT name FROM categories WHERE bank_id = $1", principal.bank_id)
    categories = {r["name"] for r in rows}
    cited = await derived.cited_rows(conn, principal.bank_id, items)
    return await asyncio.to_thread(
        _gate_all, items, deps.settings.max_fact_chars, principal.redaction_policy,
        principal.agent, categories, cited,
    )


async def prepare(
    deps: Deps, principal: Principal, items: Sequence[NewFact]
) -> tuple[list[Prepared | None], list[dict], list[Vectors]]:
    """Gate and embed a batch outside any transaction; returns (prepared, errors, vectors)."""
    async with deps.pool.acquire() as conn:
        prepared, errors = await gated(conn, deps, principal, items)
        vectors = [Vectors() for _ in items]
        if deps.embedder is not None and not errors:
            ok = [(i, p) for i, p in enumerate(prepared) if p is not None]
            embedded = await embed_fact(
                conn,
                deps.embedder,
                [(lexicon.indexed_text(p.content, p.tags), p.questions) for _, p in ok],
            )
            for (i, _), v in zip(ok, embedded, strict=True):
                vectors[i] = v
    return prepared, errors, vectors



def redacted(p: Prepared) -> list[dict[str, str]]:
    """What an outcome says was redacted: field and kind, never the text."""
    return [{"field": f.field, "kind": f.kind} for f in p.redacted]
