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
            "INSERT INTO postings (bank_id, term, fact_id, tf, doc_len) "
            "VALUES ($1, $2, $3, $4, $5)",
            [(bank_id, term, fact_id, tf, len(tokens)) for term, tf in counts.items()],
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


# --- BM25Okapi, computed inside Postgres ----------------------------------------------------
#
# The same formula as rank_bm25.BM25Okapi (k1=1.5, b=0.75, epsilon=0.25), which the tests use
# as the oracle:
#   idf(t)   = ln((N - df + 0.5) / (df + 0.5)), and where that is negative (t is in more than
#              half the facts), epsilon * mean idf over the bank's whole vocabulary;
#   score(d) = sum over query tokens q of
#              idf(q) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
# Query tokens count with their multiplicity, as rank_bm25 does. Document frequencies come from
# the postings of the query's own terms; the vocabulary mean (needed only for a negative idf) is
# computed on demand and cached per bank version.

K1 = 1.5
B = 0.75
EPSILON = 0.25

_mean_idf_cache: dict[tuple[int, int], float] = {}


def _idf(n_docs: int, df: int) -> float:
    import math

    return math.log(n_docs - df + 0.5) - math.log(df + 0.5)


async def _mean_idf(conn: asyncpg.Connection, bank_id: int, version: int, n_docs: int) -> float:
    key = (bank_id, version)
    if key not in _mean_idf_cache:
        dfs = await conn.fetch(
            "SELECT count(*) AS df FROM postings WHERE bank_id = $1 GROUP BY term", bank_id
        )
        idfs = [_idf(n_docs, r["df"]) for r in dfs]
        if len(_mean_idf_cache) > 1000:
            _mean_idf_cache.clear()
        _mean_idf_cache[key] = sum(idfs) / len(idfs) if idfs else 0.0
    return _mean_idf_cache[key]


async def bm25(
    conn: asyncpg.Connection, bank_id: int, query_tokens: Sequence[str], limit: int = 50
) -> list[tuple[int, float, int]]:
    """Top facts by BM25: (fact_id, score, number of distinct query terms matched)."""
    if not query_tokens:
        return []
    stats = await conn.fetchrow(
        "SELECT doc_count, total_len, version FROM banks WHERE id = $1", bank_id
    )
    n_docs, total = stats["doc_count"], stats["total_len"]
    if not n_docs:
        return []
    avgdl = total / n_docs
    multiplicity = Counter(query_tokens)
    rows = await conn.fetch(
        "SELECT term, count(*) AS df FROM postings WHERE bank_id = $1 AND term = ANY($2::text[]) "
        "GROUP BY term",
        bank_id,
        list(multiplicity),
    )
    if not rows:
        return []
    idf = {r["term"]: _idf(n_docs, r["df"]) for r in rows}
    if any(v < 0 for v in idf.values()):
        floor = EPSILON * await _mean_idf(conn, bank_id, stats["version"], n_docs)
        idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}
    terms = list(idf)
    weights = [idf[t] * multiplicity[t] for t in terms]
    result = await conn.fetch(
        """SELECT p.fact_id,
                  sum(w.weight * p.tf * ($4::float8 + 1)
                      / (p.tf + $4::float8
                         * (1 - $5::float8 + $5::float8 * p.doc_len / $6::float8))) AS score,
                  count(*) AS matched
           FROM unnest($2::text[], $3::float8[]) AS w(term, weight)
           JOIN postings p ON p.bank_id = $1 AND p.term = w.term
           GROUP BY p.fact_id
           ORDER BY score DESC, p.fact_id
           LIMIT $7""",
        bank_id,
        terms,
        weights,
        K1,
        B,
        avgdl,
        limit,
    )
    return [(r["fact_id"], float(r["score"]), int(r["matched"])) for r in result]
