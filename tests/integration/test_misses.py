"""Miss counting over the real services: each kind of repeat is recorded once with what the
writing session had been shown (injected, searched, never, no session), nudges and the writes
after them are counted, and /v1/stats/misses reports them per week and around a date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.integration.conftest import auth, fact_body, make_bank

PNPM = "We use pnpm, never npm, to install this repository's dependencies"


def h(token: str, session: str | None = None) -> dict[str, str]:
    return auth(token) | ({"X-Factbank-Session": session} if session else {})


async def add(stack, token: str, body: dict, session: str | None = None) -> dict:
    r = await stack.ingest.post("/v1/facts", json=body, headers=h(token, session))
    assert r.status_code in (200, 201), r.text
    return r.json()


async def report(stack, token: str, **params) -> dict:
    r = await stack.recall.get("/v1/stats/misses", params=params, headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()


async def test_each_kind_is_recorded_with_what_the_session_was_shown(stack, conn):
    bank = await make_bank(conn, "alpha")
    port = (await add(stack, bank.rw, fact_body(project="p")))["fact"]["id"]
    pnpm = (await add(stack, bank.rw, fact_body(PNPM, category="preferences", project="p",
                                                 quote="we use pnpm")))["fact"]["id"]
    # s1 is shown the port fact by a prompt block, then saves it again: a presentation miss.
    r = await stack.recall.post("/v1/inject", json={
        "kind": "prompt", "session_id": "s1", "project": "p",
        "prompt": "which port does the API listen on?"}, headers=auth(bank.ro))
    assert port in r.json()["facts"]
    assert (await add(stack, bank.rw, fact_body(project="p"), "s1"))["status"] == "reinforced"
    # s2 finds pnpm by a search, then saves it again: a presentation miss (searched).
    r = await stack.recall.post("/v1/search", json={"query": "npm or pnpm?", "project": "p"},
                                headers=h(bank.ro, "s2"))
    assert pnpm in [x["fact"]["id"] for x in r.json()["results"]]
    await add(stack, bank.rw, fact_body(PNPM, category="preferences", project="p",
                                        quote="we use pnpm"), "s2")
    # s3 never saw the port fact and corrects it: a correction, a recall miss.
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": fact_body("The API listens on port 8443", quote="port: 8443", project="p"),
        "replaces": [port], "reason": "moved behind TLS"}, headers=h(bank.rw, "s3"))
    assert r.status_code == 201, r.text
    new_port = r.json()["fact"]["id"]
    # Outside any session: not classed.
    await add(stack, bank.rw, fact_body(PNPM, category="preferences", project="p",
                                        quote="we use pnpm"))
    rows = await conn.fetch("SELECT kind, fact_id, new_fact_id, session_key, shown "
                            "FROM repeats ORDER BY id")
    from factbank.write.misses import session_key

    # the logs keep a digest of the session id, never the caller's text
    assert [tuple(r) for r in rows] == [
        ("same", port, None, session_key("s1"), "injected"),
        ("same", pnpm, None, session_key("s2"), "searched"),
        ("correction", port, new_port, session_key("s3"), "never"),
        ("same", pnpm, None, None, "unknown"),
    ]
    out = await report(stack, bank.ro)
    t = out["totals"]
    assert (t["repeats"], t["same"], t["correction"], t["recall_miss"],
            t["presentation_miss"], t["no_session"]) == (4, 3, 1, 1, 2, 1)
    assert [w["project"] for w in out["weeks"]] == ["p"]
    assert sorted(f["id"] for f in out["weeks"][0]["facts"]) == sorted([port, pnpm, port, pnpm])


async def test_a_correction_given_twice_after_nudges(stack, conn):
    bank = await make_bank(conn, "alpha")
    body = fact_body(PNPM, category="preferences", project="p", quote="we use pnpm")
    old = (await add(stack, bank.rw, fact_body(
        "We use npm to install this repository's dependencies", category="preferences",
        project="p", quote="npm install")))["fact"]["id"]

    async def nudge(session: str, prompt: str) -> dict:
        r = await stack.recall.post("/v1/inject", json={
            "kind": "prompt", "session_id": session, "project": "p", "prompt": prompt,
            "correction": True}, headers=auth(bank.ro))
        assert r.status_code == 200, r.text
        return r.json()

    first = await nudge("a", "no, we use pnpm here, not npm")
    assert first["subject"] == old  # the prompt's top hit is named, seen or not
    r = await stack.ingest.post("/v1/facts/supersede", json={
        "fact": body, "replaces": [old], "reason": "user said"}, headers=h(bank.rw, "a"))
    new = r.json()["fact"]["id"]
    await nudge("b", "no! pnpm, I told you: not npm")  # another session, the same correction
    assert (await add(stack, bank.rw, body, "b"))["status"] == "reinforced"
    rows = await conn.fetch("SELECT kind, fact_id, nudged, nudged_fact, repeated_correction "
                            "FROM repeats ORDER BY id")
    assert [tuple(r) for r in rows] == [
        ("correction", old, True, False, False),  # the first correction: not a repeat of one
        ("same", new, True, True, True),
    ]
    t = (await report(stack, bank.ro))["totals"]
    assert (t["recognised"], t["saved_after_nudge"], t["repeats_of_nudged"],
            t["repeated_correction"]) == (2, 2, 1, 1)
    # A preview records nothing.
    r = await stack.recall.post("/v1/inject", json={
        "kind": "prompt", "session_id": "c", "prompt": "no, pnpm", "correction": True,
        "preview": True}, headers=auth(bank.ro))
    assert r.status_code == 200
    assert await conn.fetchval("SELECT count(*) FROM correction_nudges") == 2


async def test_around_a_date_compares_before_and_after(stack, conn):
    bank = await make_bank(conn, "alpha")
    fid = (await add(stack, bank.rw, fact_body(project="p")))["fact"]["id"]
    for _ in range(3):
        await add(stack, bank.rw, fact_body(project="p"), "s")
    now = datetime.now(UTC)
    # Two of them happened three weeks ago (before the change).
    await conn.execute("UPDATE repeats SET at = $1 WHERE id IN (SELECT id FROM repeats "
                       "ORDER BY id LIMIT 2)", now - timedelta(weeks=3))
    out = await report(stack, bank.ro, weeks=4, around=(now - timedelta(days=7)).date()
                       .isoformat())
    assert (out["around"]["before"]["repeats"], out["around"]["after"]["repeats"]) == (2, 1)
    assert out["around"]["before"]["recall_miss"] == 2
    assert len(out["weeks"]) == 2 and all(f["id"] == fid for w in out["weeks"]
                                          for f in w["facts"])


async def test_bad_dates_are_a_400_naming_the_field(stack, conn):
    bank = await make_bank(conn, "alpha")
    for name in ("since", "around"):
        r = await stack.recall.get("/v1/stats/misses", params={name: "last week"},
                                   headers=auth(bank.ro))
        assert r.status_code == 400 and name in r.text, r.text
    r = await stack.recall.get("/v1/stats/misses", params={"weeks": 0}, headers=auth(bank.ro))
    assert r.status_code == 400 and "weeks" in r.text


async def test_an_equivalent_elsewhere_counts_and_a_different_claim_does_not(stack, conn):
    bank = await make_bank(conn, "alpha")
    held = (await add(stack, bank.rw, fact_body(project="p")))["fact"]["id"]
    # The same claim reworded, filed under another category: stored, and a repeat of it.
    out = await add(stack, bank.rw, fact_body("In production the API listens on port 8080",
                                              category="project", project="p"), "s")
    assert out["status"] == "stored"
    # A near-duplicate that is another claim (another port): stored, not a repeat.
    other = await add(stack, bank.rw, fact_body("The API listens on port 9090",
                                                quote="port: 9090", project="p"), "s")
    assert other["status"] == "stored"
    rows = await conn.fetch("SELECT kind, fact_id, new_fact_id FROM repeats ORDER BY id")
    assert [tuple(r) for r in rows] == [("equivalent", held, out["fact"]["id"])]
