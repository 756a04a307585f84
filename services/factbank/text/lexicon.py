"""The inverted index behind BM25, kept in Postgres in the same transaction as the fact.

`postings(bank_id, term, fact_id, tf)` plus per-bank `doc_count`/`total_len` are everything
BM25Okapi needs; document frequency is counted from the postings of the query's own terms, so
the cost of a query grows with those postings, not with the size of the bank.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence

import asyncpg

from factbank.text.tokenizer import tokenize


def indexed_text(content: str, tags: Sequence[str]) -> str:
    """What the fact's own vector embeds: the claim and the tags its writer gave it
    (docs/principles.md#the-writer-bridges-the-words)."""
    return content if not tags else content + "\n" + " ".join(tags)


def lexical_text(content: str, tags: Sequence[str], questions: Sequence[str] = ()) -> str:
    """What BM25 indexes: the claim, its tags and its writer questions
    (docs/principles.md#the-writer-asks-the-questions), each
    question once (field weight 1, measured in evals/README.md: "Questions in BM25")."""
    text = indexed_text(content, tags)
    return text if not questions else text + "\n" + "\n".join(questions)


async def index_fact(conn: asyncpg.Connection, bank_id: int, fact_id: int, text: str) -> int:
    """Write postings for one fact and count it in the bank's statistics; returns doc length.

    The bank row is updated first: it serialises the bank's writers before any `term_df` row is
    locked, and terms are then locked in sorted order, so two writers never deadlock.
    Tokenising (jieba) runs in a thread: a 1,000-fact import must not hold the event loop."""
    tokens = await asyncio.to_thread(tokenize, text)
    counts = Counter(tokens)
    await conn.execute(
        "UPDATE banks SET doc_count = doc_count + 1, total_len = total_len + $2 WHERE id = $1",
        bank_id,
        len(tokens),
    )
    if counts:
        terms = sorted(counts)
        await conn.executemany(
            "INSERT INTO postings (bank_id, term, fact_id, tf, doc_len) "
            "VALUES ($1, $2, $3, $4, $5)",
            [(bank_id, term, fact_id, counts[term], len(tokens)) for term in terms],
        )
        await add_document_frequencies(conn, bank_id, dict.fromkeys(terms, 1))
    await conn.execute(
        "UPDATE facts SET doc_len = $2, indexed = true WHERE id = $1", fact_id, len(tokens)
    )
    return len(tokens)


async def add_document_frequencies(
    conn: asyncpg.Connection, bank_id: int, df: Mapping[str, int]
) -> None:
    """Add `df[term]` newly indexed facts to each term's document frequency, locking the
    `term_df` rows in sorted order (see `index_fact`). Bulk loaders call it once per batch."""
    terms = sorted(df)
    await conn.execute(
        "INSERT INTO term_df (bank_id, term, df) "
        "SELECT $1, t, n FROM unnest($2::text[], $3::int[]) AS x(t, n) "
        "ON CONFLICT (bank_id, term) DO UPDATE SET df = term_df.df + excluded.df",
        bank_id,
        terms,
        [df[t] for t in terms],
    )


async def unindex_fact(conn: asyncpg.Connection, bank_id: int, fact_id: int) -> None:
    """Remove a fact from the index (deleted, or about to be re-indexed)."""
    doc_len = await conn.fetchval(
        "UPDATE facts f SET indexed = false, doc_len = 0 FROM facts old "
        "WHERE f.id = $1 AND old.id = f.id AND old.indexed RETURNING old.doc_len",
        fact_id,
    )
    if doc_len is None:
        return
    await conn.execute(
        "UPDATE banks SET doc_count = doc_count - 1, total_len = total_len - $2 WHERE id = $1",
        bank_id,
        doc_len,
    )
    terms = await conn.fetch(
        "DELETE FROM postings WHERE bank_id = $1 AND fact_id = $2 RETURNING term", bank_id, fact_id
    )
    terms = sorted(r["term"] for r in terms)
    await conn.execute(
        "DELETE FROM term_df WHERE bank_id = $1 AND term = ANY($2::text[]) AND df = 1",
        bank_id,
        terms,
    )
    await conn.execute(
        "UPDATE term_df SET df = df - 1 WHERE bank_id = $1 AND term = ANY($2::text[])",
        bank_id,
        terms,
    )


# --- BM25Okapi, computed inside Postgres ----------------------------------------------------
#
# The same formula as rank_bm25.BM25Okapi (k1=1.5, b=0.75, epsilon=0.25), which the tests use
# as the oracle:
#   idf(t)   = ln((N - df + 0.5) / (df + 0.5)), and where that is negative (t is in more than
#              half the facts), epsilon * mean idf over the bank's whole vocabulary;
#   score(d) = sum over query tokens q of
#              idf(q) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
# Query tokens count with their multiplicity, as rank_bm25 does. Document frequencies are read
# from `term_df` (one index lookup per query term); the vocabulary mean (needed only for a
# negative idf) is computed on demand and cached per bank version.
#
# Common terms. A term found in more than max(COMMON_MIN_DF, COMMON_SHARE x N) facts ("port",
# "数据库" in a big bank) has tens of thousands of postings, and scanning them is what made a
# query slow at 100k facts (bench: BM25 45 ms at 100k against 2.6 ms at 1k). Such terms are
# handled as Lucene's CommonTermsQuery handles them: when the query also has a rarer term, only
# the facts that hold a rare term are candidates, and the common terms add their exact share to
# those candidates' scores through the (bank_id, term, fact_id) key, never by a scan. A fact
# holding nothing but common query terms is then left out; its score could only come from
# terms with the lowest idf. A query made only of common terms is scored over all postings, as
# before. Every score returned is the exact BM25Okapi score; the test with rank_bm25 checks both
# paths. COMMON_MIN_DF keeps every bank under a few thousand facts (all our dev sets) exact.

K1 = 1.5
B = 0.75
EPSILON = 0.25
COMMON_MIN_DF = 1000
COMMON_SHARE = 0.01

_mean_idf_cache: dict[tuple[int, int], float] = {}


def _idf(n_docs: int, df: int) -> float:
    import math

    return math.log(n_docs - df + 0.5) - math.log(df + 0.5)


async def _mean_idf(conn: asyncpg.Connection, bank_id: int, version: int, n_docs: int) -> float:
    key = (bank_id, version)
    if key not in _mean_idf_cache:
        mean = await conn.fetchval(
            "SELECT avg(ln($2::float8 - df + 0.5) - ln(df + 0.5)) FROM term_df "
            "WHERE bank_id = $1",
            bank_id,
            n_docs,
        )
        if len(_mean_idf_cache) > 1000:
            _mean_idf_cache.clear()
        _mean_idf_cache[key] = float(mean or 0.0)
    return _mean_idf_cache[key]


_SCORE = """sum(w.weight * p.tf * ($4::float8 + 1)
    / (p.tf + $4::float8 * (1 - $5::float8 + $5::float8 * p.doc_len / $6::float8)))"""

# Each query term's postings are read through the (bank_id, term, fact_id) key, one index
# range per term. `OFFSET 0` keeps the planner from flattening the lateral subquery into a
# join: with stale statistics (a bank imported since the last ANALYZE looks empty) it chose a
# hash join over every posting of the bank, 9 ms for a 256-fact bank instead of 0.3 ms.

# Every fact holding any query term.
_ALL_TERMS = f"""
SELECT p.fact_id, {_SCORE} AS score, count(*) AS matched
FROM unnest($2::text[], $3::float8[]) AS w(term, weight)
CROSS JOIN LATERAL (
    SELECT fact_id, tf, doc_len FROM postings WHERE bank_id = $1 AND term = w.term OFFSET 0
) p
GROUP BY p.fact_id
ORDER BY score DESC, p.fact_id
LIMIT $7"""

# Candidates from the rare terms ($8) only; every query term is then looked up per candidate.
_RARE_CANDIDATES = f"""
WITH candidates AS MATERIALIZED (
    SELECT DISTINCT p.fact_id
    FROM unnest($8::text[]) AS r(term)
    CROSS JOIN LATERAL (
        SELECT fact_id FROM postings WHERE bank_id = $1 AND term = r.term OFFSET 0
    ) p
)
SELECT p.fact_id, {_SCORE} AS score, count(*) AS matched
FROM candidates c
CROSS JOIN unnest($2::text[], $3::float8[]) AS w(term, weight)
CROSS JOIN LATERAL (
    SELECT fact_id, tf, doc_len FROM postings
    WHERE bank_id = $1 AND term = w.term AND fact_id = c.fact_id OFFSET 0
) p
GROUP BY p.fact_id
ORDER BY score DESC, p.fact_id
LIMIT $7"""


def common_cutoff(n_docs: int) -> float:
    """Document frequency above which a term is common in a bank of `n_docs` facts."""
    return max(COMMON_MIN_DF, COMMON_SHARE * n_docs)


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
        "SELECT term, df FROM term_df WHERE bank_id = $1 AND term = ANY($2::text[])",
        bank_id,
        list(multiplicity),
    )
    if not rows:
        return []
    df = {r["term"]: r["df"] for r in rows}
    idf = {t: _idf(n_docs, d) for t, d in df.items()}
    if any(v < 0 for v in idf.values()):
        floor = EPSILON * await _mean_idf(conn, bank_id, stats["version"], n_docs)
        idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}
    terms = sorted(idf)
    weights = [idf[t] * multiplicity[t] for t in terms]
    cutoff = common_cutoff(n_docs)
    rare = [t for t in terms if df[t] <= cutoff]
    args = [bank_id, terms, weights, K1, B, avgdl, limit]
    if rare and len(rare) < len(terms):
        result = await conn.fetch(_RARE_CANDIDATES, *args, rare)
    else:
        result = await conn.fetch(_ALL_TERMS, *args)
    return [(r["fact_id"], float(r["score"]), int(r["matched"])) for r in result]
