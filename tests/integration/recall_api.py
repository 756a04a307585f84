"""A small bank of facts for the recall tests on the in-process stack (`fill`), and the two
calls they make of the recall service (`search`, `inject`)."""

from __future__ import annotations

from tests.integration.conftest import auth, fact_body

FACTS = [
    (
        "The billing API listens on port 8080",
        "environment",
        ["billing", "api", "端口", "port"],
        None,
    ),
    (
        "Postgres for ledgerline runs on host db-2 port 5433",
        "environment",
        ["postgres", "数据库", "database", "ledgerline"],
        "ledgerline",
    ),
    (
        "Always use pnpm in this repository, never npm",
        "preferences",
        ["pnpm", "npm", "包管理器", "package manager"],
        None,
    ),
    (
        "错误 E0502 的原因是同时存在可变借用和不可变借用",
        "gotchas",
        ["rust", "E0502", "borrow", "借用"],
        None,
    ),
    (
        "The nightly tidemark job writes Parquet files to /data/tidemark/out",
        "project",
        ["tidemark", "parquet", "夜跑", "nightly"],
        "tidemark",
    ),
    (
        "部署由 argo 完成, 不要手动 kubectl apply",
        "decisions",
        ["argo", "部署", "deploy", "kubectl"],
        None,
    ),
]


async def fill(stack, token, items=FACTS):
    ids = []
    for content, category, tags, project in items:
        r = await stack.ingest.post(
            "/v1/facts",
            headers=auth(token),
            json=fact_body(content, category=category, tags=tags, project=project),
        )
        assert r.status_code == 201, r.text
        ids.append(r.json()["fact"]["id"])
    return ids


async def search(stack, token, query, **kw):
    r = await stack.recall.post("/v1/search", json={"query": query, **kw}, headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()


async def inject(stack, token, kind, session="s1", **kw):
    r = await stack.recall.post(
        "/v1/inject", json={"kind": kind, "session_id": session, **kw}, headers=auth(token)
    )
    assert r.status_code == 200, r.text
    return r.json()
