"""The inverted index behind BM25, kept in Postgres in the same transaction as the fact.

`postings(bank_id, term, fact_id, tf)` plus per-bank `doc_count`/`total_len` are everything
BM25Okapi needs; document frequency is counted from the postings of the query's own terms, so
the cost of a query grows with those postings, not with the size of the bank.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import asyncpg

from factbank.tokenizer import tokenize


def indexed_text(content: str, tags: Sequence[str]) -> str:
    """What both legs index: the claim and the tags its writer gave it (principle 14)."""
    return content if not tags else content + "\n" + " ".join(tags)


async def index_fact(conn: asyncpg.Connection, bank_id: int, fact_id: int, text: str) -> int:
    """Write postings for one fact and count it in the bank's statistics; returns doc length."""
    tokens = tokenize(text)
    counts = Counter(tokens)
    if counts:
        await conn.executemany(
            "INSERT INTO postings (bank_id, term, fact_id, tf) VALUES ($1, $2, $3, $4)",
            [(bank_id, term, fact_id, tf) for term, tf in counts.items()],
        )
    await conn.execute(
        "UPDATE facts SET doc_len = $2, indexed = true WHERE id = $1", fact_id, len(tokens)
    )
    await conn.execute(
        "UPDATE banks SET doc_count = doc_count + 1, total_len = total_len + $2 WHERE id = $1",
        bank_id,
        len(tokens),
    )
    return len(tokens)


async def unindex_fact(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> None:
    """Remove a fact from the index (deleted, or about to be re-indexed)."""
    doc_len = await conn.fetchval(
        "UPDATE facts f SET indexed = false, doc_len = 0 FROM facts old "
        "WHERE f.id = $1 AND old.id = f.id AND old.indexed RETURNING old.doc_len",
        fact_id,
    )
    if doc_len is None:
        return
    await conn.execute("DELETE FROM postings WHERE bank_id = $1 AND fact_id = $2", bank_id, fact_id)
    await conn.execute(
        "UPDATE banks SET doc_count = doc_count - 1, total_len = total_len - $2 WHERE id = $1",
        bank_id,
        doc_len,
    )
