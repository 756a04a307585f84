"""The read routes the dashboard added: whoami, growth, a fact's possible
duplicates, the fact list's tag filter and newest-first order."""

from __future__ import annotations

from tests.integration.conftest import auth, fact_body


async def _add(stack, token, content, **over):
    r = await stack.ingest.post("/v1/facts", json=fact_body(content, **over), headers=auth(token))
    assert r.status_code == 201, r.text
    return r.json()


async def test_whoami_names_bank_member_and_scopes(stack, two_banks):
    alpha, beta = two_banks
    r = await stack.recall.get("/v1/whoami", headers=auth(alpha.ro))
    assert r.json() == {"bank": "alpha", "kind": "personal", "member": "alice",
                        "scopes": ["read"]}
    r = await stack.recall.get("/v1/whoami", headers=auth(beta.admin))
    assert r.json()["scopes"] == ["admin", "read", "write"] and r.json()["kind"] == "team"


async def test_growth_counts_facts_per_day(stack, two_banks):
    alpha, beta = two_banks
    for i in range(3):
        await _add(stack, alpha.rw, f"Service {i} listens on port 80{i}0")
    await _add(stack, beta.rw, "A team fact")
    r = await stack.recall.get("/v1/stats/growth", params={"days": 7}, headers=auth(alpha.ro))
    days = r.json()["days"]
    assert len(days) == 7 and days[-1]["created"] == 3  # today, alpha's only
    assert sum(d["created"] for d in days) == 3
    r = await stack.recall.get("/v1/stats/growth", params={"days": 0}, headers=auth(alpha.ro))
    assert r.status_code == 400 and "days" in r.text


async def test_duplicates_follow_the_write_gates_rule(stack, two_banks):
    alpha, beta = two_banks
    first = (await _add(stack, alpha.rw, "The API listens on port 8080"))["fact"]["id"]
    second = await _add(stack, alpha.rw, "The API listens on port 8081",
                        quote="port: 8081")
    assert second["status"] == "stored" and first in second["possible_duplicate_of"]
    other = (await _add(stack, alpha.rw, "Backups run nightly at 02:00 UTC",
                        quote="cron: 0 2 * * *", tags=["backup"]))["fact"]["id"]
    r = await stack.recall.get(f"/v1/facts/{second['fact']['id']}/duplicates",
                               headers=auth(alpha.ro))
    ids = [d["id"] for d in r.json()["duplicates"]]
    assert first in ids and second["fact"]["id"] not in ids and other not in ids
    r = await stack.recall.get(f"/v1/facts/{other}/duplicates", headers=auth(alpha.ro))
    assert r.json()["duplicates"] == []
    r = await stack.recall.get(f"/v1/facts/{first}/duplicates", headers=auth(beta.ro))
    assert r.status_code == 404


async def test_list_filters_by_tag_and_pages_newest_first(stack, two_banks):
    alpha, _ = two_banks
    ids = [(await _add(stack, alpha.rw, f"Worker {i} runs on w{i}.internal",
                       quote=f"w{i}", tags=["workers", f"w{i}"]))["fact"]["id"]
           for i in range(5)]
    await _add(stack, alpha.rw, "Unrelated fact about backups", quote="b", tags=["backup"])
    r = await stack.recall.get("/v1/facts", params={"tag": "workers", "order": "desc",
                                                    "limit": 2}, headers=auth(alpha.ro))
    page = r.json()
    assert [f["id"] for f in page["facts"]] == ids[::-1][:2]
    r = await stack.recall.get("/v1/facts", params={
        "tag": "workers", "order": "desc", "limit": 2, "after": page["next_cursor"]},
        headers=auth(alpha.ro))
    assert [f["id"] for f in r.json()["facts"]] == ids[::-1][2:4]
    r = await stack.recall.get("/v1/facts", params={"tag": "w3"}, headers=auth(alpha.ro))
    assert [f["id"] for f in r.json()["facts"]] == [ids[3]]
    r = await stack.recall.get("/v1/facts", params={"order": "sideways"}, headers=auth(alpha.ro))
    assert r.status_code == 400 and "order" in r.text
