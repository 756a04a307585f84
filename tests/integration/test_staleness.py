"""Staleness, the server: fingerprints, verify (every verdict), the review cascade over derived
facts (transitive, cycle-safe), confirm with a fresh quote, review cleared by a confirm,
supersede of a stale fact, stale and flagged facts never injected but searchable and marked,
the session block's "turned stale since your last session" lines inside the budget, `check`
writing nothing, the list filters, bank isolation and bad input naming the field. All against
the real services and Postgres."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from factbank.observability import STALENESS
from factbank.read import inject
from factbank.store import banks
from tests.integration.conftest import auth, fact_body
from tests.integration.secrets_probe import dump_tables
from tests.integration.staleness_api import (
    PROJECT,
    add,
    file_fact,
    fingerprint,
    history,
    inject_ids,
    sha,
    verify,
)


def stale(fact_id: int, reason: str = "the quote is gone from deploy/api.yaml:12",
          context: str = "12: port: 9090") -> dict:
    return {"id": fact_id, "verdict": "stale", "reason": reason, "context": context}


async def kinds(stack, token, fact_id) -> list[str]:
    return [e["kind"] for e in (await history(stack, token, fact_id))["events"]]


async def search(stack, token, query) -> list[dict]:
    r = await stack.recall.post("/v1/search", json={"query": query, "project": PROJECT},
                                headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()["results"]


async def version(conn, bank: str) -> int:
    return await conn.fetchval("SELECT version FROM banks WHERE name = $1", bank)


# --- fingerprints ------------------------------------------------------------------------


async def test_a_fingerprint_is_stored_redacted_and_returned(stack, two_banks, conn):
    alpha, _ = two_banks
    key = "AKIAQ7R2X9KD4M3ZTB5W"
    body = file_fact("The API listens on port 8080", "deploy/api.yaml:12", "port: 8080")
    body["fingerprint"]["path"] = f"deploy/{key}/api.yaml"
    out = await add(stack, alpha.rw, body)
    fp = out["fact"]["fingerprint"]
    assert fp["quote_sha256"] == sha("port: 8080") and fp["line"] == 12
    assert fp["commit"] == "b" * 40 and fp["dirty"] is False
    assert key not in fp["path"] and "[REDACTED:" in fp["path"]
    assert key not in str(await conn.fetchval("SELECT fingerprint::text FROM facts"))
    # Read back by every view.
    got = (await history(stack, alpha.ro, out["fact"]["id"]))["fact"]
    assert got["fingerprint"] == fp and got["stale"] is None and got["cites"] == []


@pytest.mark.parametrize(
    ("fp", "field"),
    [
        ({"quote_sha256": "xyz"}, "quote_sha256"),
        ({"file_blob": "not-a-blob"}, "file_blob"),
        ({"commit": "HEAD"}, "commit"),
        ({"line": 0}, "line"),
        ({"colour": "red"}, "colour"),
        ({"path": "p" * 1001}, "path"),
    ],
)
async def test_a_bad_fingerprint_is_a_4xx_naming_the_field(stack, two_banks, conn, fp, field):
    alpha, _ = two_banks
    body = file_fact("The API listens on port 8080", "deploy/api.yaml:12", "port: 8080")
    body["fingerprint"].update(fp)
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(alpha.rw))
    assert 400 <= r.status_code < 500 and field in r.text, r.text
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


async def test_a_fingerprint_on_a_source_without_a_file_is_refused(stack, two_banks):
    alpha, _ = two_banks
    body = fact_body(source={"kind": "user"}, quote="port: 8080", fingerprint=fingerprint())
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(alpha.rw))
    assert r.status_code == 422
    assert [x["field"] for x in r.json()["reasons"]] == ["fingerprint"]


# --- verify: every verdict -----------------------------------------------------------------


async def test_verify_fresh_moved_stale_in_one_transaction(stack, two_banks, conn):
    alpha, _ = two_banks
    a = (await add(stack, alpha.rw, file_fact(
        "The API listens on port 8080", "deploy/api.yaml:12", "port: 8080")))["fact"]
    b = (await add(stack, alpha.rw, file_fact(
        "The worker runs four threads", "deploy/app.yaml:14", "threads: 4")))["fact"]
    c = (await add(stack, alpha.rw, file_fact(
        "Staging uses Postgres 16", "deploy/staging.yaml:3", "postgres: 16")))["fact"]
    moved_fp = fingerprint("deploy/app.yaml", 18, "threads: 4")
    before = await version(conn, "alpha")
    counted = {k: STALENESS.labels(outcome=k)._value.get() for k in ("fresh", "moved", "stale")}
    out = await verify(stack, alpha.rw, [
        {"id": a["id"], "verdict": "fresh"},
        {"id": b["id"], "verdict": "moved", "location": "deploy/app.yaml:18",
         "fingerprint": moved_fp, "reason": "the quote moved"},
        stale(c["id"], "the quote is gone from deploy/staging.yaml:3",
              "2: database:\n3:   postgres: 17\n4:   pool: 10"),
    ])
    assert (out["fresh"], out["moved"], out["stale"], out["still_stale"]) == (1, 1, 1, 0)
    assert sorted(f["id"] for f in out["changed"]) == sorted([b["id"], c["id"]])
    assert await version(conn, "alpha") == before + 1  # one transaction, one version
    # counted (docs/principles.md#silent-failures-are-the-worst)
    assert {k: STALENESS.labels(outcome=k)._value.get() - v for k, v in counted.items()} == {
        "fresh": 1, "moved": 1, "stale": 1}

    fa = (await history(stack, alpha.ro, a["id"]))["fact"]
    assert fa["verified_at"] is not None and fa["status"] == "active"
    assert await kinds(stack, alpha.ro, a["id"]) == ["created"]  # fresh: no event

    hb = await history(stack, alpha.ro, b["id"])
    assert hb["fact"]["source"]["location"] == "deploy/app.yaml:18"
    assert hb["fact"]["fingerprint"] == moved_fp and hb["fact"]["status"] == "active"
    relocated = hb["events"][-1]
    assert relocated["kind"] == "relocated"
    assert relocated["reason"].startswith("deploy/app.yaml:14 -> deploy/app.yaml:18")

    hc = await history(stack, alpha.ro, c["id"])
    fc = hc["fact"]
    assert fc["status"] == "stale"
    assert fc["stale"]["reason"] == "the quote is gone from deploy/staging.yaml:3"
    assert "postgres: 17" in fc["stale"]["context"] and fc["stale"]["since"]
    staled = hc["events"][-1]
    assert staled["kind"] == "staled" and staled["reason"] == fc["stale"]["reason"]
    # Staleness is not a judgement of the claim: trust is unchanged, and says so in the event.
    assert fc["trust"] == c["trust"] and staled["trust_before"] == staled["trust_after"]
    assert await conn.fetchval(
        "SELECT count(*) FROM audit_log WHERE action = 'fact.verify'") == 1


async def test_a_stale_fact_stays_stale_and_its_reason_changes_only_when_it_changed(
    stack, two_banks
):
    alpha, _ = two_banks
    f = (await add(stack, alpha.rw, file_fact(
        "Staging uses Postgres 16", "deploy/staging.yaml:3", "postgres: 16")))["fact"]
    await verify(stack, alpha.rw, [stale(f["id"], "the quote changed")])
    since = (await history(stack, alpha.ro, f["id"]))["fact"]["stale"]["since"]
    out = await verify(stack, alpha.rw, [stale(f["id"], "the quote changed")])
    assert (out["stale"], out["still_stale"], out["changed"]) == (0, 1, [])
    assert (await kinds(stack, alpha.ro, f["id"])).count("staled") == 1
    out = await verify(stack, alpha.rw, [stale(f["id"], "deploy/staging.yaml was deleted")])
    assert out["still_stale"] == 1 and [x["id"] for x in out["changed"]] == [f["id"]]
    h = await history(stack, alpha.ro, f["id"])
    assert h["fact"]["stale"]["reason"] == "deploy/staging.yaml was deleted"
    assert h["fact"]["stale"]["since"] == since  # stale since the first time
    assert (await kinds(stack, alpha.ro, f["id"])).count("staled") == 2
    # Fresh or moved on a stale fact changes nothing: only a confirm with a fresh quote does.
    out = await verify(stack, alpha.rw, [{"id": f["id"], "verdict": "fresh"}])
    assert out["fresh"] == 0 and [s["id"] for s in out["skipped"]] == [f["id"]]
    assert "confirm" in out["skipped"][0]["reason"]
    assert (await history(stack, alpha.ro, f["id"]))["fact"]["status"] == "stale"


async def test_retired_facts_are_skipped(stack, two_banks):
    alpha, _ = two_banks
    f = (await add(stack, alpha.rw, file_fact(
        "Staging uses Postgres 16", "deploy/staging.yaml:3", "postgres: 16")))["fact"]
    r = await stack.ingest.delete(f"/v1/facts/{f['id']}", headers=auth(alpha.rw))
    assert r.status_code == 200
    out = await verify(stack, alpha.rw, [stale(f["id"])])
    assert out["stale"] == 0 and out["skipped"] == [
        {"id": f["id"], "reason": f"fact #{f['id']} is deleted"}]
    assert (await history(stack, alpha.ro, f["id"]))["fact"]["status"] == "deleted"


@pytest.mark.parametrize(
    ("results", "project", "field"),
    [
        ([{"id": 99999, "verdict": "fresh"}], PROJECT, "results[1].id"),
        ([{"id": "{a}", "verdict": "moved"}], PROJECT, "results[1].location"),
        ([{"id": "{a}", "verdict": "stale"}], PROJECT, "results[1].reason"),
        ([{"id": "{a}", "verdict": "fresh"}], PROJECT, "results[1].id"),  # listed twice
        ([{"id": "{a}", "verdict": "moved", "location": "x" * 501}], PROJECT,
         "results[1].location"),
        ([], "github.com/other/repo", "results[0].id"),  # not a fact of that project
    ],
)
async def test_a_bad_verdict_refuses_the_whole_batch_naming_the_item(
    stack, two_banks, conn, results, project, field
):
    alpha, _ = two_banks
    a = (await add(stack, alpha.rw, file_fact(
        "The API listens on port 8080", "deploy/api.yaml:12", "port: 8080")))["fact"]
    items = [stale(a["id"])] + [
        {**r, "id": a["id"] if r["id"] == "{a}" else r["id"]} for r in results
    ]
    before = await dump_tables(conn)
    r = await stack.ingest.post("/v1/facts/verify", json={"project": project, "results": items},
                                headers=auth(alpha.rw))
    assert r.status_code == 422, r.text
    assert field in {x["field"] for e in r.json()["errors"] for x in e["reasons"]}, r.text
    after = await dump_tables(conn)
    assert {k: v for k, v in after.items() if k != "tokens"} == {
        k: v for k, v in before.items() if k != "tokens"}, "a refused verify wrote something"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"results": [{"id": 1, "verdict": "gone"}]}, "verdict"),
        ({"results": [{"id": 1, "verdict": "stale", "reason": "r" * 1001}]}, "reason"),
        ({"results": [{"id": 1, "verdict": "stale", "reason": "x", "context": "c" * 4001}]},
         "context"),
        ({"results": [{"id": 1, "verdict": "fresh"}] * 1001}, "results"),
        ({"results": [{"id": 1, "verdict": "fresh", "line": 3}]}, "line"),
        ({"project": "p" * 301, "results": []}, "project"),
    ],
)
async def test_verify_bad_input_is_a_4xx_naming_the_field(stack, two_banks, body, field):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/facts/verify", json=body, headers=auth(alpha.rw))
    assert 400 <= r.status_code < 500 and field in r.text, r.text


async def test_verify_redacts_every_text_it_stores(stack, two_banks, conn):
    alpha, _ = two_banks
    key = "AKIAQ7R2X9KD4M3ZTB5W"
    a = (await add(stack, alpha.rw, file_fact(
        "The API listens on port 8080", "deploy/api.yaml:12", "port: 8080")))["fact"]
    b = (await add(stack, alpha.rw, file_fact(
        "The worker runs four threads", "deploy/app.yaml:14", "threads: 4")))["fact"]
    out = await verify(stack, alpha.rw, [
        stale(a["id"], f"the quote changed: now key {key}", f"12: aws_key: {key}"),
        {"id": b["id"], "verdict": "moved", "location": f"deploy/{key}.yaml:3",
         "fingerprint": fingerprint(f"deploy/{key}.yaml", 3, "threads: 4")},
    ])
    assert key not in str(out)
    tables = "\n".join((await dump_tables(conn)).values())
    assert key not in tables and tables.count("[REDACTED:") >= 4


# --- derived facts and the review cascade -------------------------------------------------


def derived(content: str, cites: list[int], quote: str) -> dict:
    return fact_body(content, source={"kind": "fact", "location": ", ".join(
        f"#{i}" for i in cites)}, quote=quote, project=PROJECT, category="project")


async def chain(stack, token, port: int = 8080) -> tuple[dict, dict, dict]:
    """a (a file fact) <- b (cites a) <- c (cites b)."""
    a = (await add(stack, token, file_fact(
        f"The API listens on port {port}", "deploy/api.yaml:12", f"port: {port}")))["fact"]
    b = (await add(stack, token, derived(
        f"Health checks must probe port {port}", [a["id"]], f"listens on port {port}")))["fact"]
    c = (await add(stack, token, derived(
        f"The load balancer health check targets the API's probe port {port}", [b["id"]],
        f"probe port {port}")))["fact"]
    assert len({a["id"], b["id"], c["id"]}) == 3
    return a, b, c


async def test_a_derived_fact_cites_facts_that_hold_and_quotes_one(stack, two_banks, conn):
    alpha, beta = two_banks
    a, b, c = await chain(stack, alpha.rw)
    assert b["source"] == {"kind": "fact", "location": f"#{a['id']}"} and b["cites"] == [a["id"]]
    assert c["cites"] == [b["id"]]
    for body, field in [
        (derived("Port 8080 is probed", [99999], "port 8080"), "source.location"),
        (derived("Port 8080 is probed", [a["id"]], "port 9090"), "quote"),
        ({**derived("Port 8080 is probed", [a["id"]], "port 8080"),
          "source": {"kind": "fact", "location": "deploy/api.yaml:12"}}, "source.location"),
    ]:
        r = await stack.ingest.post("/v1/facts", json=body, headers=auth(alpha.rw))
        assert r.status_code == 422, r.text
        assert field in {x["field"] for x in r.json()["reasons"]}, r.text
    # Another bank's fact cannot be cited: it is not in this bank.
    r = await stack.ingest.post("/v1/facts", json=derived("Port 8080 is probed", [a["id"]],
                                "port 8080"), headers=auth(beta.rw))
    assert r.status_code == 422 and "no such fact" in r.text and "8080" not in r.json()["detail"]
    # A retired fact cannot be cited.
    r = await stack.ingest.delete(f"/v1/facts/{c['id']}", headers=auth(alpha.rw))
    r = await stack.ingest.post("/v1/facts", json=derived(
        "The balancer probe is documented", [c["id"]], "health check targets"),
        headers=auth(alpha.rw))
    assert r.status_code == 422 and "deleted" in r.text
    assert await conn.fetchval("SELECT count(*) FROM fact_citations") == 2


async def test_an_imported_derived_fact_may_cite_a_fact_retired_since(stack, two_banks):
    alpha, _ = two_banks
    a, _, _ = await chain(stack, alpha.rw)
    r = await stack.ingest.delete(f"/v1/facts/{a['id']}", headers=auth(alpha.rw))
    line = derived("Probes target port 8080 on the API", [a["id"]], "port 8080")
    r = await stack.ingest.post("/v1/facts/import", content=json.dumps(line) + "\n",
                                headers=auth(alpha.rw))
    assert r.status_code == 422 and "deleted" in r.text, r.text  # a new fact: must hold
    restored = {**line, "restore": {"id": 7, "status": "active", "trust": 0.5}}
    r = await stack.ingest.post("/v1/facts/import", content=json.dumps(restored) + "\n",
                                headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    assert r.json()["results"][0]["fact"]["cites"] == [a["id"]]


async def test_stale_cascades_review_flags_transitively(stack, two_banks):
    alpha, _ = two_banks
    a, b, c = await chain(stack, alpha.rw)
    out = await verify(stack, alpha.rw, [stale(a["id"])])
    assert out["flagged"] == 2 and sorted(out["flagged_ids"]) == sorted([b["id"], c["id"]])
    for fact, direct in ((b, True), (c, False)):
        h = await history(stack, alpha.ro, fact["id"])
        review = h["fact"]["review"]
        assert review["cause"] == a["id"] and review["since"]
        assert (f"cites #{a['id']}" if direct else f"depends on #{a['id']}") in review["reason"]
        assert "turned stale" in review["reason"]
        assert h["fact"]["status"] == "active"  # flagged, not stale: its own source is facts
        flagged = h["events"][-1]
        assert flagged["kind"] == "flagged" and flagged["related_fact"] == a["id"]
        assert flagged["trust_before"] == flagged["trust_after"]
    # Flagged once: a second change upstream does not stack flags.
    out = await verify(stack, alpha.rw, [stale(a["id"], "deploy/api.yaml was deleted")])
    assert out["flagged"] == 0
    assert (await kinds(stack, alpha.ro, c["id"])).count("flagged") == 1


async def test_the_cascade_survives_a_cycle(stack, two_banks, conn):
    alpha, _ = two_banks
    a, b, c = await chain(stack, alpha.rw)
    # The API cannot make a cycle (a fact cites only older facts); a hand edit can.
    bank_id = await conn.fetchval("SELECT id FROM banks WHERE name = 'alpha'")
    await conn.execute("INSERT INTO fact_citations (fact_id, cites, bank_id) VALUES ($1, $2, $3)",
                       a["id"], c["id"], bank_id)
    out = await verify(stack, alpha.rw, [stale(a["id"])])
    assert sorted(out["flagged_ids"]) == sorted([b["id"], c["id"]])
    assert (await history(stack, alpha.ro, a["id"]))["fact"]["review"] is None


async def test_supersede_delete_and_purge_cascade_too(stack, two_banks):
    alpha, _ = two_banks
    a, b, _ = await chain(stack, alpha.rw)
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": file_fact("The API listens on port 8443", "deploy/api.yaml:12", "port: 8443"),
        "replaces": [a["id"]], "reason": "moved to 8443"}, headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    review = (await history(stack, alpha.ro, b["id"]))["fact"]["review"]
    assert review["cause"] == a["id"] and "was superseded" in review["reason"]

    a2, b2, _ = await chain(stack, alpha.rw, 8081)
    r = await stack.ingest.delete(f"/v1/facts/{a2['id']}", headers=auth(alpha.rw))
    assert r.status_code == 200
    review = (await history(stack, alpha.ro, b2["id"]))["fact"]["review"]
    assert review["cause"] == a2["id"] and "was deleted" in review["reason"]

    a3, b3, _ = await chain(stack, alpha.rw, 8082)
    r = await stack.ingest.delete(f"/v1/facts/{a3['id']}/purge", headers=auth(alpha.admin))
    assert r.status_code == 200, r.text
    fact = (await history(stack, alpha.ro, b3["id"]))["fact"]
    assert fact["review"]["cause"] == a3["id"] and "was purged" in fact["review"]["reason"]
    assert fact["cites"] == []  # the citation went with the purged fact; the flag names it


async def test_a_confirm_reviews_a_flagged_fact(stack, two_banks):
    alpha, _ = two_banks
    a, b, c = await chain(stack, alpha.rw)
    await verify(stack, alpha.rw, [stale(a["id"])])
    r = await stack.ingest.post(f"/v1/facts/{b['id']}/confirm",
                                json={"reason": "still true: the probe moved with it"},
                                headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    assert r.json()["review"] is None and r.json()["status"] == "active"
    events = (await history(stack, alpha.ro, b["id"]))["events"]
    assert [e["kind"] for e in events[-2:]] == ["confirmed", "reviewed"]
    assert events[-1]["trust_before"] == events[-1]["trust_after"] == events[-2]["trust_after"]
    assert events[-1]["related_fact"] == a["id"]
    # c is still under review (its own flag), until it is confirmed too.
    assert (await history(stack, alpha.ro, c["id"]))["fact"]["review"] is not None


# --- confirm with a fresh quote, supersede of a stale fact --------------------------------


async def test_a_stale_fact_confirmed_with_a_fresh_quote_is_active_again(stack, two_banks):
    alpha, _ = two_banks
    f = (await add(stack, alpha.rw, file_fact(
        "The worker runs four threads", "deploy/app.yaml:14", "threads: 4")))["fact"]
    await verify(stack, alpha.rw, [stale(f["id"], "the quote is gone from deploy/app.yaml:14")])
    # Without a fresh quote: refused, naming what is missing; nothing changes.
    r = await stack.ingest.post(f"/v1/facts/{f['id']}/confirm", json={"reason": "looks fine"},
                                headers=auth(alpha.rw))
    assert r.status_code == 422 and r.json()["reasons"][0]["field"] == "quote", r.text
    assert (await history(stack, alpha.ro, f["id"]))["fact"]["status"] == "stale"
    # A quote the gate refuses is refused by the same gate.
    r = await stack.ingest.post(f"/v1/facts/{f['id']}/confirm", json={
        "quote": "", "location": "deploy/app.yaml:30"}, headers=auth(alpha.rw))
    assert r.status_code == 422 and r.json()["reasons"][0]["field"] == "quote", r.text

    fp = fingerprint("deploy/app.yaml", 30, "threads: 4")
    r = await stack.ingest.post(f"/v1/facts/{f['id']}/confirm", json={
        "reason": "found it again", "quote": "threads: 4", "location": "deploy/app.yaml:30",
        "fingerprint": fp, "project": PROJECT, "remotes": [PROJECT]}, headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    fact = r.json()
    assert fact["status"] == "active" and fact["stale"] is None
    assert fact["source"]["location"] == "deploy/app.yaml:30" and fact["fingerprint"] == fp
    assert fact["verified_at"] is not None and fact["trust"] > f["trust"]
    events = (await history(stack, alpha.ro, f["id"]))["events"]
    assert [e["kind"] for e in events[-2:]] == ["confirmed", "refreshed"]
    assert events[-2]["project"] == PROJECT and events[-2]["remotes"] == [PROJECT]
    assert "deploy/app.yaml:30" in events[-1]["reason"] and "was stale" in events[-1]["reason"]
    # The refresh changes no trust and reports the trust the confirm left (it showed the
    # trust from before the confirm).
    assert events[-1]["trust_before"] == events[-1]["trust_after"] == events[-2]["trust_after"]
    assert events[-2]["trust_after"] == fact["trust"]


async def test_a_stale_fact_can_be_superseded(stack, two_banks):
    alpha, _ = two_banks
    f = (await add(stack, alpha.rw, file_fact(
        "Staging uses Postgres 16", "deploy/staging.yaml:3", "postgres: 16")))["fact"]
    await verify(stack, alpha.rw, [stale(f["id"], "the quote changed: now 'postgres: 17'")])
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": file_fact("Staging uses Postgres 17", "deploy/staging.yaml:3", "postgres: 17"),
        "replaces": [f["id"]], "reason": "staging moved to 17"}, headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    old = (await history(stack, alpha.ro, f["id"]))["fact"]
    assert old["status"] == "superseded" and old["superseded_by"] == r.json()["fact"]["id"]


# --- injection and search -----------------------------------------------------------------

QUESTION = "Which port does the zircon gateway listen on?"


async def test_stale_and_flagged_facts_are_searchable_marked_and_never_injected(
    stack, two_banks
):
    alpha, _ = two_banks
    a = (await add(stack, alpha.rw, {**file_fact(
        "The zircon gateway listens on port 8080", "deploy/gateway.yaml:12", "port: 8080"),
        "category": "project", "questions": [QUESTION]}))["fact"]
    b = (await add(stack, alpha.rw, {**derived(
        "The zircon gateway health probe uses port 8080", [a["id"]], "port 8080"),
        "questions": ["Which port does the zircon gateway health probe use?"]}))["fact"]
    # The control: while fresh, both are injected, at session start and for the prompt.
    assert {a["id"], b["id"]} <= set((await inject_ids(stack, alpha.ro, "s0"))["facts"])
    assert a["id"] in (await inject_ids(stack, alpha.ro, "p0", QUESTION))["facts"]

    await verify(stack, alpha.rw, [stale(a["id"], "the quote is gone from "
                                         "deploy/gateway.yaml:12")])
    hits = await search(stack, alpha.ro, QUESTION)
    assert hits and hits[0]["fact"]["id"] == a["id"]  # still the best match, ranked as before
    assert hits[0]["fact"]["status"] == "stale"
    assert hits[0]["fact"]["stale"]["reason"].startswith("the quote is gone")
    flagged = [h for h in await search(stack, alpha.ro, "zircon gateway health probe port")
               if h["fact"]["id"] == b["id"]]
    assert flagged and flagged[0]["fact"]["review"]["cause"] == a["id"]

    for n, prompt in enumerate([QUESTION, "Which port does the zircon gateway health probe "
                                "use?"]):
        block = await inject_ids(stack, alpha.ro, f"p{n + 1}", prompt)
        assert a["id"] not in block["facts"] and b["id"] not in block["facts"], block
        assert "8080" not in block["text"], block
    session = await inject_ids(stack, alpha.ro, "s1")
    assert a["id"] not in session["facts"] and b["id"] not in session["facts"]
    # Named (by id and reason), not injected: their content is not in the block.
    assert f"#{a['id']} stale: the quote is gone" in session["text"]
    assert f"#{b['id']} under review: cites #{a['id']}" in session["text"]
    assert "zircon gateway listens" not in session["text"]


async def test_the_session_block_names_what_turned_stale_since_the_last_session(
    stack, two_banks, conn
):
    alpha, _ = two_banks
    old = (await add(stack, alpha.rw, file_fact(
        "Staging uses Postgres 16", "deploy/staging.yaml:3", "postgres: 16")))["fact"]
    await verify(stack, alpha.rw, [stale(old["id"], "the quote changed at deploy/staging.yaml:3")])
    # The caller's previous session in the project starts after that...
    r = await stack.ingest.post("/v1/timeline/events", json={"events": [
        {"session_id": "prev", "kind": "session_start", "project": PROJECT,
         "agent": "codex"}]}, headers=auth(alpha.rw))
    assert r.status_code == 201, r.text
    new = (await add(stack, alpha.rw, file_fact(
        "The worker runs four threads", "deploy/app.yaml:14", "threads: 4")))["fact"]
    await verify(stack, alpha.rw, [stale(new["id"], "the quote is gone from deploy/app.yaml:14")])
    # ... so this session is told of the one that turned stale since, not the older one.
    text = (await inject_ids(stack, alpha.ro, "cur"))["text"]
    assert f"#{new['id']} stale: the quote is gone from deploy/app.yaml:14" in text
    assert f"#{old['id']}" not in text and "re-verify or supersede" in text
    # Another member's sessions are not "your last session".
    bob = await make_member_token(conn, "bob")
    assert f"#{old['id']}" in (await inject_ids(stack, bob, "bob-1"))["text"]
    # Without any earlier session: the last 7 days; older staleness is not news.
    await conn.execute("UPDATE facts SET stale_since = $1 WHERE id = $2",
                       datetime.now(UTC) - timedelta(days=8), old["id"])
    assert f"#{old['id']}" not in (await inject_ids(stack, bob, "bob-2"))["text"]
    # Another project's session block says nothing of these.
    assert "Turned stale" not in (await inject_ids(stack, alpha.ro, "o1",
                                                   project="github.com/x/y"))["text"]


async def make_member_token(conn, member: str) -> str:
    _, token = await banks.issue_token(conn, "alpha", member, "read,write")
    return token


async def test_many_stale_facts_are_all_named_inside_the_budget(stack, two_banks):
    alpha, _ = two_banks
    ids = []
    for n in range(12):
        f = (await add(stack, alpha.rw, file_fact(
            f"Service {n} listens on port {9000 + n}", f"deploy/s{n}.yaml:{n + 1}",
            f"port: {9000 + n}", category="project")))["fact"]
        ids.append(f["id"])
    # A long project fact block competes for the same budget.
    for n in range(30):
        await add(stack, alpha.rw, fact_body(
            f"Module m{n} is owned by team t{n} and deployed by pipeline p{n} every night "
            f"from the release branch with canary checks on hosts h{n}a and h{n}b",
            source={"kind": "user"}, quote=f"module m{n} owner t{n}", project=PROJECT,
            category="project"))
    await verify(stack, alpha.rw, [stale(i, f"the quote is gone from deploy/s{n}.yaml:{n + 1}")
                                   for n, i in enumerate(ids)])
    block = await inject_ids(stack, alpha.ro, "s-many")
    assert all(f"#{i}" in block["text"] for i in ids), block["text"]
    assert block["tokens"] <= inject.SESSION_BUDGET
    assert inject.estimate_tokens(block["text"]) <= inject.SESSION_BUDGET
    assert not set(ids) & set(block["facts"])
    # Shared between banks (banks=2), the line group keeps to its share too.
    r = await stack.recall.post("/v1/inject", json={
        "kind": "session", "session_id": "s-half", "project": PROJECT, "banks": 2},
        headers=auth(alpha.ro))
    assert inject.estimate_tokens(r.json()["text"]) <= inject.SESSION_BUDGET // 2


# --- check writes nothing ------------------------------------------------------------------


async def test_check_decides_everything_and_writes_nothing(stack, two_banks, conn):
    alpha, _ = two_banks
    stored = (await add(stack, alpha.rw, fact_body("The API listens on port 8080")))["fact"]
    before = await dump_tables(conn)
    key = "ghp_R7mK2xQ9vL4pT8wN3jH6sD1fG5aZ0cB4yE2u"
    items = [
        fact_body("The API listens on port 8080"),  # the same claim
        fact_body("The API listens on port 8081", quote="port: 8081"),  # a correction
        fact_body("Nightly backups are copied to the tape library in Leeds",
                  quote="backup: tape-leeds", tags=["backup"], category="decisions"),  # new
        fact_body("x", quote=""),  # refused by the gate
        fact_body("The deploy token is set", quote=f"token: {key}"),  # redacted
        fact_body("Builds run nightly", category="nonsense"),  # unknown category
        {**fact_body("Builds run nightly"), "project": f"proj {key}"},
    ]
    r = await stack.ingest.post("/v1/facts/check", json={"facts": items},
                                headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert len(res) == len(items)
    assert res[0]["verdict"] == "same_claim" and res[0]["same_as"] == stored["id"]
    assert res[1]["verdict"] == "new" and res[1]["possible_duplicate_of"] == [stored["id"]]
    assert res[2] == {"verdict": "new", "same_as": None, "possible_duplicate_of": [],
                      "reasons": [], "redacted": []}
    assert res[3]["verdict"] == "refused" and {x["field"] for x in res[3]["reasons"]} == {
        "quote"}
    assert res[4]["verdict"] == "new" and res[4]["redacted"] == [
        {"field": "quote", "kind": res[4]["redacted"][0]["kind"]}]
    assert res[5]["verdict"] == "refused" and res[5]["reasons"][0]["field"] == "category"
    assert res[6]["verdict"] == "new"  # its project redacted, like a save
    assert key not in r.text
    after = await dump_tables(conn)
    assert {k: v for k, v in after.items() if k != "tokens"} == {
        k: v for k, v in before.items() if k != "tokens"}, "check wrote something"


async def test_check_bad_input_and_scopes(stack, two_banks, conn):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/facts/check", json={"facts": [fact_body()] * 201},
                                headers=auth(alpha.rw))
    assert r.status_code == 400 and "facts" in r.text
    r = await stack.ingest.post("/v1/facts/check", json={"facts": [{"content": "x"}]},
                                headers=auth(alpha.rw))
    assert r.status_code == 400 and "category" in r.text
    r = await stack.ingest.post("/v1/facts/check", json={"facts": [fact_body()]},
                                headers=auth(alpha.ro))
    assert r.status_code == 403
    # The reject policy: a secret is a refusal of that item, never a 5xx or a write.
    await banks.set_redaction_policy(conn, "alpha", "reject")
    r = await stack.ingest.post("/v1/facts/check", json={"facts": [fact_body(
        quote="aws_secret = AKIAQ7R2X9KD4M3ZTB5W")]}, headers=auth(alpha.rw))
    assert r.status_code == 200 and r.json()["results"][0]["verdict"] == "refused", r.text
    assert "AKIAQ7R2X9KD4M3ZTB5W" not in r.text


# --- the list filters, bank isolation of the new routes -------------------------------------


async def test_list_filters_by_source_kind_and_statuses(stack, two_banks):
    alpha, _ = two_banks
    f1 = (await add(stack, alpha.rw, file_fact(
        "The API listens on port 8080", "deploy/api.yaml:12", "port: 8080")))["fact"]
    f2 = (await add(stack, alpha.rw, file_fact(
        "The worker runs four threads", "deploy/app.yaml:14", "threads: 4")))["fact"]
    c = (await add(stack, alpha.rw, fact_body(
        "Releases are tagged by the release job", source={"kind": "commit",
        "location": "abc1234"}, quote="tag releases", project=PROJECT)))["fact"]
    u = (await add(stack, alpha.rw, fact_body(
        "We use pnpm", source={"kind": "user"}, quote="we use pnpm", project=PROJECT)))["fact"]
    await verify(stack, alpha.rw, [stale(f2["id"])])
    await stack.ingest.delete(f"/v1/facts/{f1['id']}", headers=auth(alpha.rw))

    async def ids(**params) -> list[int]:
        r = await stack.recall.get("/v1/facts", params={"project": PROJECT, **params},
                                   headers=auth(alpha.ro))
        assert r.status_code == 200, r.text
        return [f["id"] for f in r.json()["facts"]]

    assert await ids(source_kind="file") == [f2["id"]]
    assert await ids(source_kind="file,commit") == [f2["id"], c["id"]]
    assert await ids(source_kind="file", statuses="active,stale,deleted") == [f1["id"], f2["id"]]
    assert await ids(statuses="active,disputed") == [c["id"], u["id"]]
    assert await ids(statuses="stale") == [f2["id"]]
    for params, name in [({"statuses": "active,rotten"}, "statuses"),
                         ({"source_kind": "rumour"}, "source_kind"),
                         ({"statuses": "active", "status": "stale"}, "statuses")]:
        r = await stack.recall.get("/v1/facts", params=params, headers=auth(alpha.ro))
        assert r.status_code == 400 and name in r.json()["detail"], r.text


async def test_the_new_routes_keep_banks_apart(stack, two_banks):
    alpha, beta = two_banks
    fb = (await add(stack, beta.rw, file_fact(
        "Beta's ledger listens on port 7070", "deploy/ledger.yaml:2", "port: 7070")))["fact"]
    r = await stack.ingest.post("/v1/facts/verify", json={"results": [stale(fb["id"])]},
                                headers=auth(alpha.rw))
    assert r.status_code == 422 and "7070" not in r.text and "ledger" not in r.text
    r = await stack.ingest.post(f"/v1/facts/{fb['id']}/confirm", json={
        "quote": "port: 7070", "project": PROJECT}, headers=auth(alpha.rw))
    assert r.status_code == 404
    r = await stack.ingest.post("/v1/facts/check", json={"facts": [file_fact(
        "Beta's ledger listens on port 7070", "deploy/ledger.yaml:2", "port: 7070")]},
        headers=auth(alpha.rw))
    assert r.json()["results"][0]["verdict"] == "new"  # beta's copy is not a duplicate here
    r = await stack.recall.get("/v1/facts", params={"source_kind": "file"},
                               headers=auth(alpha.ro))
    assert r.json()["facts"] == []
    fact = (await history(stack, beta.ro, fb["id"]))["fact"]
    assert fact["status"] == "active" and fact["stale"] is None
