"""BM25 inside Postgres equals rank_bm25.BM25Okapi on the same tokens (the oracle)."""

from __future__ import annotations

import pytest
from rank_bm25 import BM25Okapi

from factbank.text import lexicon
from factbank.text.tokenizer import tokenize
from tests.integration.conftest import auth, fact_body

FACTS = [
    ("The billing API listens on port 8080", ["billing", "api", "账单"]),
    ("账单服务 ledgerline 部署在 host db-2 上", ["ledgerline", "账单服务", "billing"]),
    ("Use pnpm, never npm, in the kitewing repo", ["pnpm", "包管理", "kitewing"]),
    ("Postgres for ledgerline runs on db-2:5433", ["postgres", "数据库", "ledgerline"]),
    ("错误 E0502 的原因是同时借用了可变引用", ["rust", "E0502", "借用"]),
    ("The nightly job writes Parquet to /data/tidemark/out", ["tidemark", "parquet", "夜跑"]),
    ("Redis cache is at cache-1:6379 for the billing API", ["redis", "缓存", "billing"]),
    ("CI runs on runner-7 with 4 GB of memory", ["ci", "runner", "内存"]),
    ("The billing API needs Python 3.11", ["python", "billing", "版本"]),
    ("Deploys for the billing API go through argo", ["argo", "部署", "billing"]),
]

QUERIES = [
    "billing api port",  # 'billing' is in more than half the facts: negative idf
    "ledgerline 数据库 端口",
    "E0502",
    "which host runs the billing service? 账单",
    "pnpm npm",
    "nothing matches zzzz",
    "billing billing api",  # repeated query tokens count twice, as in rank_bm25
]


@pytest.fixture
async def bank(stack, two_banks):
    alpha, _ = two_banks
    for content, tags in FACTS:
        r = await stack.ingest.post(
            "/v1/facts", json=fact_body(content, tags=tags), headers=auth(alpha.rw)
        )
        assert r.status_code == 201, r.text
    return alpha


async def oracle(conn, query: str) -> tuple[int, list[str], dict[int, list[str]], dict]:
    """(bank id, query tokens, each fact's tokens, rank_bm25's score of each fact)."""
    bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = 'alpha'")
    rows = await conn.fetch(
        "SELECT id, content, tags FROM facts WHERE bank_id = $1 ORDER BY id", bank_id
    )
    corpus = {r["id"]: tokenize(lexicon.indexed_text(r["content"], list(r["tags"]))) for r in rows}
    q = tokenize(query)
    scores = BM25Okapi(list(corpus.values())).get_scores(q)
    return bank_id, q, corpus, dict(zip(corpus, scores, strict=True))


@pytest.mark.parametrize("query", QUERIES)
async def test_scores_equal_rank_bm25(bank, conn, query):
    bank_id, q, corpus, expected = await oracle(conn, query)
    got = {fid: score for fid, score, _ in await lexicon.bm25(conn, bank_id, q, limit=100)}
    for fid, score in expected.items():
        if fid in got:
            assert got[fid] == pytest.approx(score, rel=1e-9, abs=1e-12)
        else:  # a fact that shares no term with the query is not returned at all
            assert not set(q) & set(corpus[fid])


@pytest.mark.parametrize("query", QUERIES)
async def test_common_terms_only_score_rare_terms_candidates(bank, conn, query, monkeypatch):
    """With a cutoff of 2 facts, 'billing', 'api', 'ci'... are common here: the candidates are
    the facts holding a rarer query term, and each candidate's score is still exactly BM25."""
    monkeypatch.setattr(lexicon, "COMMON_MIN_DF", 2)
    monkeypatch.setattr(lexicon, "COMMON_SHARE", 0.0)
    bank_id, q, corpus, expected = await oracle(conn, query)
    df = {t: sum(t in doc for doc in corpus.values()) for t in set(q)}
    present = {t for t in df if df[t]}
    rare = {t for t in present if df[t] <= 2}
    holds = {fid: set(doc) for fid, doc in corpus.items()}
    if rare and rare != present:
        wanted = {fid for fid, terms in holds.items() if terms & rare}
    else:
        wanted = {fid for fid, terms in holds.items() if terms & present}
    got = {fid: score for fid, score, _ in await lexicon.bm25(conn, bank_id, q, limit=100)}
    assert set(got) == wanted
    for fid, score in got.items():
        assert score == pytest.approx(expected[fid], rel=1e-9, abs=1e-12)


async def test_term_df_follows_edits_and_deletes(bank, conn, stack):
    """term_df is the postings' document frequency after adds, re-indexing edits and deletes."""
    ids = [r["id"] for r in await conn.fetch("SELECT id FROM facts ORDER BY id")]
    r = await stack.ingest.patch(
        f"/v1/facts/{ids[0]}", json={"tags": ["gateway", "billing"]}, headers=auth(bank.rw)
    )
    assert r.status_code == 200, r.text
    r = await stack.ingest.delete(f"/v1/facts/{ids[1]}", headers=auth(bank.rw))
    assert r.status_code == 200, r.text
    counted = await conn.fetch(
        "SELECT bank_id, term, count(*)::int AS df FROM postings GROUP BY bank_id, term "
        "ORDER BY 1, 2"
    )
    stored = await conn.fetch("SELECT bank_id, term, df FROM term_df ORDER BY 1, 2")
    assert [tuple(r) for r in stored] == [tuple(r) for r in counted]
    assert "gateway" in {r["term"] for r in stored}


async def test_query_without_usable_terms_returns_nothing(bank, conn):
    bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = 'alpha'")
    for query in ["", "   ", "the and of", "的 了 是", "!!! ??? ..."]:
        assert await lexicon.bm25(conn, bank_id, tokenize(query)) == []


async def test_user_text_is_never_query_syntax(bank, conn):
    bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = 'alpha'")
    for query in ["billing' OR 1=1 --", "port & | ! :*", "$1 %s ${x}", "\\x00 ' \""]:
        got = await lexicon.bm25(conn, bank_id, tokenize(query), limit=100)  # never raises
        # Only the query's words match, scored as the oracle scores them: syntax adds nothing.
        _, q, corpus, want = await oracle(conn, query)
        for fid, score, _ in got:
            assert set(q) & set(corpus[fid]), (query, fid)
            assert score == pytest.approx(want[fid], rel=1e-9, abs=1e-12)
        if "billing" in q:
            assert got, query  # the words around the syntax still find their facts


async def test_index_statistics_match_postings(bank, conn):
    stats = await conn.fetchrow("SELECT doc_count, total_len FROM banks WHERE name = 'alpha'")
    assert stats["doc_count"] == len(FACTS)
    assert stats["total_len"] == await conn.fetchval(
        "SELECT sum(doc_len) FROM facts f JOIN banks b ON b.id = f.bank_id WHERE b.name = 'alpha'"
    )


async def test_upgrading_a_database_backfills_term_df(bank, conn):
    """A database indexed before 0002 existed gets every term's df from its postings."""
    from factbank.store import migrations

    expected = await conn.fetch("SELECT bank_id, term, df FROM term_df ORDER BY 1, 2")
    await conn.execute("DROP TABLE term_df")
    await conn.execute("DELETE FROM schema_migrations WHERE name = '0002_term_df.sql'")
    applied = await migrations.migrate(conn)
    assert [m.name for m in applied] == ["0002_term_df.sql"]
    got = await conn.fetch("SELECT bank_id, term, df FROM term_df ORDER BY 1, 2")
    assert [tuple(r) for r in got] == [tuple(r) for r in expected] and got
