"""The recall service end to end: hybrid search, floor, supersede redirect, project boost,
injection budgets and session dedupe, fallback without an embedder, and the cache."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from litestar.testing import AsyncTestClient

from factbank.trust import DEFAULT as POLICY
from factbank_recall import app as recall_app
from tests.integration.conftest import auth, fact_body
from tests.integration.recall_api import fill, inject, search


async def test_exact_paraphrase_and_crosslingual(stack, two_banks):
    alpha, _ = two_banks
    ids = await fill(stack, alpha.rw)
    top = lambda res: [h["fact"]["id"] for h in res["results"]]  # noqa: E731
    assert top(await search(stack, alpha.ro, "E0502"))[0] == ids[3]
    assert ids[2] in top(await search(stack, alpha.ro, "which package manager should I use?"))
    assert ids[2] in top(await search(stack, alpha.ro, "用什么包管理器安装依赖"))
    assert ids[1] in top(await search(stack, alpha.ro, "ledgerline 的数据库在哪台机器"))


async def test_no_answer_returns_nothing(stack, two_banks):
    alpha, _ = two_banks
    await fill(stack, alpha.rw)
    for query in ["What is the capital of Mongolia?", "巴黎的天气怎么样", "the and of the"]:
        res = await search(stack, alpha.ro, query)
        assert res["results"] == [], (query, res["results"])
        assert (await inject(stack, alpha.ro, "prompt", prompt=query))["text"] == ""


async def test_the_gate_decides_and_the_prompt_block_keeps_only_hits_near_the_best(
    stack, two_banks, monkeypatch
):
    """With the companion floor at 0, a search whose best hit clears the gate returns every
    candidate after it; the prompt block holds the best hit and only the hits within
    PROMPT_MARGIN of it (on the ranking score); a query whose best hit is under the gate gets
    nothing from either."""
    from factbank.read import fusion
    from factbank.read import inject as inject_mod

    alpha, _ = two_banks
    ids = await fill(stack, alpha.rw)
    monkeypatch.setattr(fusion, "companion_floor", lambda params=fusion.DEFAULT: 0.0)
    res = await search(stack, alpha.ro, "E0502 是什么错误", limit=10)
    assert res["results"][0]["fact"]["id"] == ids[3]
    assert len(res["results"]) > 1
    assert min(h["relevance"] for h in res["results"]) < fusion.DEFAULT.floor
    best = res["results"][0]["score"]
    near = [
        h["fact"]["id"]
        for h in res["results"]
        if h["score"] >= best - inject_mod.PROMPT_MARGIN
    ]
    block = await inject(stack, alpha.ro, "prompt", prompt="E0502 是什么错误")
    assert block["facts"] == near[: inject_mod.PROMPT_TOP]
    assert block["facts"][0] == ids[3] and len(near) < len(res["results"])
    for query in ["What is the capital of Mongolia?", "巴黎的天气怎么样"]:
        assert (await search(stack, alpha.ro, query, limit=10))["results"] == []
        assert (await inject(stack, alpha.ro, "prompt", prompt=query))["facts"] == []


async def test_category_names_never_match(stack, two_banks):
    alpha, _ = two_banks
    await fill(stack, alpha.rw)
    res = await search(stack, alpha.ro, "gotchas", mode="lexical")
    assert res["results"] == []


async def test_superseded_match_returns_current_fact(stack, two_banks):
    alpha, _ = two_banks
    ids = await fill(stack, alpha.rw)
    r = await stack.ingest.post(
        "/v1/facts/supersede",
        headers=auth(alpha.rw),
        json={
            "fact": fact_body(
                "The billing API moved to port 9090", tags=["billing", "api", "port"]
            ),
            "replaces": [ids[0]],
            "reason": "nginx migration",
        },
    )
    new_id = r.json()["fact"]["id"]
    res = await search(stack, alpha.ro, "billing API port 8080")
    first = res["results"][0]
    assert first["fact"]["id"] == new_id
    assert ids[0] not in [h["fact"]["id"] for h in res["results"]]
    assert (
        first["via"] == {"superseded": ids[0], "reason": "nginx migration"} or first["via"] is None
    )  # the new fact may also match on its own
    block = await inject(stack, alpha.ro, "prompt", prompt="billing API port 8080")
    assert f"#{ids[0]} " not in block["text"]
    assert f"#{new_id} " in block["text"]


async def test_the_gate_opens_on_the_best_eligible_hit(stack, two_banks):
    """What may not be returned (another category, a supersede chain ending on a deleted
    fact) is set aside before the gate (fusion.apply_floor): it never opens the gate for the
    weaker hits after it, and is not counted as refused."""
    alpha, _ = two_banks
    ids = await fill(stack, alpha.rw)
    top = lambda res: [h["fact"]["id"] for h in res["results"]]  # noqa: E731
    query = "E0502 是什么错误"
    assert top(await search(stack, alpha.ro, query, category="gotchas")) == [ids[3]]
    # Without the gotcha, the best environment fact is no answer: under the gate, nothing.
    elsewhere = await search(stack, alpha.ro, query, category="environment")
    assert elsewhere["results"] == [] and elsewhere["below_floor"] > 0
    unfloored = await search(stack, alpha.ro, query, category="environment", floor=False)
    assert unfloored["results"] and unfloored["below_floor"] == 0
    assert {h["fact"]["category"] for h in unfloored["results"]} == {"environment"}
    # The billing fact is superseded and its successor deleted: it stands for nothing.
    r = await stack.ingest.post(
        "/v1/facts/supersede",
        headers=auth(alpha.rw),
        json={
            "fact": fact_body("The billing API moved to port 9090", tags=["billing", "port"]),
            "replaces": [ids[0]],
            "reason": "nginx migration",
        },
    )
    new_id = r.json()["fact"]["id"]
    r = await stack.ingest.delete(f"/v1/facts/{new_id}", headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    res = await search(stack, alpha.ro, "billing API port 8080", floor=False)
    assert not {ids[0], new_id} & set(top(res))


async def test_project_boost(stack, two_banks):
    alpha, _ = two_banks
    items = [
        ("Tests run with pytest -x --ff", "project", ["pytest", "测试"], "one"),
        ("Tests run with pytest -x --ff -q", "project", ["pytest", "测试"], "two"),
    ]
    one, two = await fill(stack, alpha.rw, items)
    for project, first in (("one", one), ("two", two)):
        res = await search(stack, alpha.ro, "how do tests run with pytest", project=project)
        assert res["results"][0]["fact"]["id"] == first


async def test_disputed_is_searchable_but_never_injected(stack, two_banks):
    alpha, _ = two_banks
    ids = await fill(stack, alpha.rw)
    r = await stack.ingest.post(
        f"/v1/facts/{ids[3]}/dispute", json={"reason": "wrong"}, headers=auth(alpha.rw)
    )
    # One dispute: 0.75 -> 0.45, still above the injection floor, so still active.
    trust = POLICY.dispute(POLICY.initial("verified"))
    assert r.json()["trust"] == pytest.approx(trust) and r.json()["status"] == "active"
    for _ in range(2):
        r = await stack.ingest.post(
            f"/v1/facts/{ids[3]}/dispute", json={"reason": "still wrong"}, headers=auth(alpha.rw)
        )
        trust = POLICY.dispute(trust)
    # Three: under the floor, so disputed (searchable, never injected).
    assert r.json()["trust"] == pytest.approx(trust) and trust < POLICY.injection_floor
    assert r.json()["status"] == "disputed"
    assert ids[3] in [h["fact"]["id"] for h in (await search(stack, alpha.ro, "E0502"))["results"]]
    block = await inject(stack, alpha.ro, "prompt", prompt="E0502")
    assert f"#{ids[3]} " not in block["text"]


async def test_session_injection_budget_and_once_per_session(stack, two_banks):
    alpha, _ = two_banks
    ids = await fill(stack, alpha.rw)
    block = await inject(stack, alpha.ro, "session", project="ledgerline")
    text = block["text"]
    assert f"#{ids[2]} " in text  # preferences: auto-injected
    assert f"#{ids[1]} " in text  # this project's fact
    assert f"#{ids[0]} " in text  # environment: auto-injected (global)
    assert f"#{ids[4]} " not in text  # another project's fact
    assert f"#{ids[3]} " not in text  # gotchas are not auto-injected
    assert "trust 0.75" in text and block["tokens"] <= 1500
    again = await inject(stack, alpha.ro, "session", project="ledgerline")
    assert again["text"] == "" and again["facts"] == []  # each fact at most once
    other = await inject(stack, alpha.ro, "session", session="s2", project="ledgerline")
    assert set(other["facts"]) == set(block["facts"])
    p = await inject(stack, alpha.ro, "prompt", session="s2", prompt="E0502 是什么错误")
    assert p["facts"] == [ids[3]]
    p = await inject(stack, alpha.ro, "prompt", session="s2", prompt="E0502 是什么错误")
    assert p["text"] == ""


async def test_oversized_fact_is_cut_and_budget_is_kept(stack, two_banks):
    alpha, _ = two_banks
    long = "The deploy checklist says: " + "; ".join(
        f"step {i} check the host-{i} logs" for i in range(40)
    )
    items = [(long[:990], "preferences", ["deploy", "checklist", "部署"], None)] + [
        (f"Service s{i} listens on port {7000 + i}", "environment", ["port", "端口"], None)
        for i in range(60)
    ]
    await fill(stack, alpha.rw, items)
    block = await inject(stack, alpha.ro, "session")
    assert "(cut; full text: factbank get" in block["text"]
    assert block["tokens"] <= 1500
    assert len(block["facts"]) > 5  # the long fact did not starve the rest


async def test_nothing_qualifies_nothing_returned(stack, two_banks):
    alpha, _ = two_banks
    block = await inject(stack, alpha.ro, "session", project="x")
    assert block == {"text": "", "facts": [], "tokens": 0, "bank": "alpha", "degraded": None,
                     "sources": [], "subject": None}


async def test_write_is_visible_to_next_recall_and_cache_hits(stack, two_banks):
    alpha, _ = two_banks
    await fill(stack, alpha.rw)
    q = "where does the nightly job write parquet"
    first = await search(stack, alpha.ro, q)
    second = await search(stack, alpha.ro, q)
    assert second["cached"] is True and first["cached"] is False
    await fill(
        stack,
        alpha.rw,
        [
            (
                "Nightly Parquet output is mirrored to s3://tide/out",
                "project",
                ["parquet", "s3"],
                "tidemark",
            )
        ],
    )
    third = await search(stack, alpha.ro, q)
    assert third["cached"] is False  # the write bumped the bank version
    stats = (await stack.recall.get("/v1/stats", headers=auth(alpha.ro))).json()
    assert stats["cache"]["result"]["hits"] >= 1
    assert stats["cache"]["query_embedding"]["hits"] >= 1


async def test_without_embedder_falls_back_to_lexical(dsn, settings, two_banks, stack):
    from dataclasses import replace

    alpha, _ = two_banks
    await fill(stack, alpha.rw)
    async with AsyncTestClient(
        app=recall_app.create(replace(settings, embedder="none"), dsn=dsn)
    ) as recall:
        r = await recall.post("/v1/search", json={"query": "E0502"}, headers=auth(alpha.ro))
        body = r.json()
        assert body["results"] and "lexical" in body["degraded"]
        r = await recall.post(
            "/v1/inject",
            headers=auth(alpha.ro),
            json={"kind": "prompt", "session_id": "x", "prompt": "E0502"},
        )
        assert "lexical" in r.json()["degraded"]


async def test_small_bank_in_large_table_gets_dense_results(stack, two_banks, conn):
    _, beta = two_banks
    await fill(stack, beta.rw)
    # 3,000 facts with synthetic vectors in bank alpha, all close to one another
    bank = await conn.fetchval("SELECT id FROM banks WHERE name = 'alpha'")
    member = await conn.fetchval("SELECT id FROM members WHERE bank_id = $1", bank)
    rng = np.random.default_rng(0)
    base = rng.normal(size=384)
    vecs = base + 0.05 * rng.normal(size=(3000, 384))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    await conn.copy_records_to_table(
        "facts",
        columns=[
            "bank_id",
            "content",
            "category",
            "source_kind",
            "quote",
            "origin",
            "trust",
            "created_by_member",
            "content_hash",
        ],
        records=[
            (bank, f"synthetic {i}", "reference", "user", "q", "user", 0.9, member, bytes(32))
            for i in range(len(vecs))
        ],
    )
    ids = [r["id"] for r in await conn.fetch(
        "SELECT id FROM facts WHERE bank_id = $1 ORDER BY id", bank)]
    await conn.copy_records_to_table(
        "fact_vectors",
        columns=["fact_id", "bank_id", "ord", "lang", "embedding"],
        records=[(i, bank, 0, "en", v.astype(np.float32)) for i, v in zip(ids, vecs, strict=True)],
    )
    await conn.execute("ANALYZE facts")
    await conn.execute("ANALYZE fact_vectors")
    # What is tested is the dense leg's filtered scan, not the gate: this Chinese question's
    # dense relevance for the argo fact sits near the gate (0.45-0.5, by the CPU's rounding
    # of the 4-bit model), so the gate is off and the answer must still come first.
    res = await search(stack, beta.ro, "部署用什么工具", mode="dense", limit=5, floor=False)
    assert len(res["results"]) >= 1
    assert all(h["fact"]["bank"] == "beta" for h in res["results"])
    assert res["results"][0]["fact"]["content"].startswith("部署由 argo")
    assert res["results"][0]["dense"] > 0.85


@pytest.fixture
async def own_redis():
    """A throwaway redis-server on a free port, so the test can stop it for real."""
    import shutil

    from factbank.runtime.runner import free_port

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("needs the redis-server binary to start and stop a real Redis")
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    import redis.asyncio as aioredis

    client = aioredis.from_url(f"redis://127.0.0.1:{port}/0")
    for _ in range(50):
        try:
            await client.ping()
            break
        except Exception:
            await asyncio.sleep(0.1)
    await client.aclose()
    yield f"redis://127.0.0.1:{port}/0", proc
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def test_recall_survives_redis_stopping(dsn, settings, two_banks, stack, own_redis):
    from dataclasses import replace

    url, proc = own_redis
    alpha, _ = two_banks
    await fill(stack, alpha.rw)
    async with AsyncTestClient(
        app=recall_app.create(replace(settings, redis_url=url), dsn=dsn)
    ) as recall:
        q = {"query": "E0502 是什么错误"}
        first = (await recall.post("/v1/search", json=q, headers=auth(alpha.ro))).json()
        second = (await recall.post("/v1/search", json=q, headers=auth(alpha.ro))).json()
        assert second["cached"] is True and first["results"] == second["results"]
        import redis.asyncio as aioredis

        r = aioredis.from_url(url)
        assert await r.keys("fb:r:*") and await r.keys("fb:qe:*")
        await r.aclose()
        proc.terminate()
        await proc.wait()
        third = (await recall.post("/v1/search", json=q, headers=auth(alpha.ro))).json()
        assert [h["fact"]["id"] for h in third["results"]] == [
            h["fact"]["id"] for h in first["results"]
        ]
        stats = (await recall.get("/v1/stats", headers=auth(alpha.ro))).json()
        assert stats["cache"]["backend"] == "redis"
        assert stats["cache"]["result"]["errors"] >= 1
        assert (await recall.get("/readyz")).status_code == 503


# Chinese sentences and lines that are not Chinese but not English text either (an ISBN, a
# motto, a line of dashes, a place of publication), saved bare, as imported notes are. Labelled
# by their letters, the stray lines were centred as English and lifted by the whole zh>en gap
# above better Chinese answers (mlqa-r-zh-dev dense R@5 0.751 against plain 0.819).
NATIVE_ZH = [
    "几家公司分别开始为这种处理器移植操作系统，包括 Windows 和 Linux 的多个版本。",
    "研究团队设计了一种叫做超长指令字的新架构，让处理器在一个时钟周期内执行多条指令。",
    "这家芯片公司在九十年代与合作伙伴一起开发了新一代服务器处理器。",
    "这座城市的主要宗教是佛教，但法律保障宗教自由。",
    "每年的这一天是该国军队的法定节日。",
    "ISBN 978-7-111-54493-7.",
    "Semper Fidelis）。",
    "──。",
    "Oxford: Clarendon Press, 1998.",
]


@pytest.mark.parametrize(("query", "top_two"), [
    ("那种新架构叫什么名字？", {1, 2}),
    ("处理器一个周期能执行几条指令？", {0, 1}),
])
async def test_stray_non_chinese_lines_are_not_lifted_over_chinese_answers(
        stack, two_banks, query, top_two):
    _, beta = two_banks
    ids = await fill(stack, beta.rw, [(t, "reference", [], None) for t in NATIVE_ZH])
    res = await search(stack, beta.ro, query, mode="dense", limit=5, floor=False)
    got = [h["fact"]["id"] for h in res["results"]]
    assert set(got[:2]) == {ids[i] for i in top_two}, [NATIVE_ZH[ids.index(g)] for g in got]


async def test_one_connection_serves_a_recall_whose_steps_run_at_once(
    dsn, settings, two_banks, stack
):
    """The legs and the two language groups' graph walks each take a connection of their own;
    with a pool of one they take turns (none holds one while waiting for another), and the
    answer is the one the full pool gives."""
    from dataclasses import replace

    alpha, _ = two_banks
    await fill(stack, alpha.rw)
    query = {"query": "部署用什么工具 deploy tool", "limit": 5, "floor": False}
    want = await search(stack, alpha.ro, query["query"], limit=5, floor=False)
    assert want["results"]
    async with AsyncTestClient(
        app=recall_app.create(replace(settings, pool_size=1), dsn=dsn)
    ) as recall:
        r = await asyncio.wait_for(
            recall.post("/v1/search", json=query, headers=auth(alpha.ro)), timeout=60)
    got = r.json()
    assert [h["fact"]["id"] for h in got["results"]] == \
        [h["fact"]["id"] for h in want["results"]]


STOPWORD_FACTS = [
    ("I can wait for you.", "reference", [], None),
    ("Where are you? I am here, by the door.", "reference", [], None),
    ("The deploy pipeline uses argo rollouts with a 10% canary.", "project", [], None),
    ("我想出国留学。", "reference", [], None),
]


@pytest.mark.parametrize("query, answer", [
    ("我可以等你。", 0),  # every word a stopword, zh -> en
    ("where are you?", 1),  # every word a stopword, en -> en
    ("你在哪里？", 1),  # every word a stopword, zh -> en
])
async def test_a_question_made_of_stopwords_is_still_searched_by_meaning(
    stack, two_banks, query, answer
):
    """BM25 has no term for these, the embedder has their meaning: dense and hybrid find the
    answer (lexical cannot, and says nothing); text with no word at all matches nothing."""
    alpha, _ = two_banks
    ids = await fill(stack, alpha.rw, STOPWORD_FACTS)
    for mode in ("dense", "hybrid"):
        res = await search(stack, alpha.ro, query, mode=mode, floor=False)
        assert res["results"] and res["results"][0]["fact"]["id"] == ids[answer], (mode, res)
    assert (await search(stack, alpha.ro, query, mode="lexical", floor=False))["results"] == []
    for nothing in ("。？！", "?? ...", "   "):
        assert (await search(stack, alpha.ro, nothing, floor=False))["results"] == []
