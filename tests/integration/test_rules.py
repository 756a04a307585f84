"""The rule-promotion gate, `GET /v1/rules/candidates`, on the real services: a fact
confirmed in two unrelated projects is a candidate with its evidence; projects related by a
shared remote are not two projects; a dispute after the confirms takes it out; a same-claim
fact in the other project counts, a correction ("port 8081" after "port 8081") does not;
confirms without a project, stale facts and other banks never count."""

from __future__ import annotations

from tests.integration.conftest import auth, fact_body

A = "github.com/acme/api"
B = "github.com/globex/web"
C = "github.com/initech/tools"


def user_fact(content: str, project: str | None = None, **over) -> dict:
    body = fact_body(content, source={"kind": "user"}, quote=content, category="preferences",
                     tags=[], project=project)
    body.update(over)
    return body


async def add(stack, token, body) -> int:
    r = await stack.ingest.post("/v1/facts", json=body, headers=auth(token))
    assert r.status_code == 201, r.text
    return r.json()["fact"]["id"]


async def confirm(stack, token, fact_id, project=None, remotes=(), reason="held here"):
    body: dict = {"reason": reason}
    if project is not None:
        body["project"] = project
    if remotes:
        body["remotes"] = list(remotes)
    r = await stack.ingest.post(f"/v1/facts/{fact_id}/confirm", json=body, headers=auth(token))
    assert r.status_code == 200, r.text


async def candidates(stack, token) -> list[dict]:
    r = await stack.recall.get("/v1/rules/candidates", headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()["candidates"]


async def test_two_unrelated_projects_make_a_candidate_with_its_evidence(stack, two_banks):
    alpha, beta = two_banks
    f = await add(stack, alpha.rw, user_fact("Use pnpm, never npm"))
    await confirm(stack, alpha.rw, f, A, [A])
    assert await candidates(stack, alpha.ro) == []  # one project is not two
    await confirm(stack, alpha.rw, f, A, [A])  # nor is the same project twice
    assert await candidates(stack, alpha.ro) == []
    await confirm(stack, alpha.rw, f, None)  # a confirm that says no project counts for none
    assert await candidates(stack, alpha.ro) == []
    await stack.ingest.post(f"/v1/facts/{f}/confirm", json={"project": B, "remotes": [B]},
                            headers={**auth(alpha.rw), "X-Factbank-Agent": "codex"})
    (cand,) = await candidates(stack, alpha.ro)
    assert cand["fact"]["id"] == f and cand["projects"] == [A, B]
    evidence = {(e["project"], e["fact_id"]) for e in cand["evidence"]}
    assert evidence == {(A, f), (B, f)}
    latest_a = [e for e in cand["evidence"] if e["project"] == A]
    assert len(latest_a) == 1  # the latest confirm per project and fact
    b = next(e for e in cand["evidence"] if e["project"] == B)
    assert b["member"] == "alice" and b["agent"] == "codex" and b["event_id"] and b["at"]
    # Another bank sees none of it.
    assert await candidates(stack, beta.ro) == []


async def test_projects_sharing_a_remote_are_one_project(stack, two_banks):
    alpha, _ = two_banks
    f = await add(stack, alpha.rw, user_fact("Run the linters before every commit"))
    # A fork: its clone has the upstream as a remote.
    await confirm(stack, alpha.rw, f, A, [A])
    await confirm(stack, alpha.rw, f, "github.com/alice/api", ["github.com/alice/api", A])
    assert await candidates(stack, alpha.ro) == []
    # Two clones with a shared mirror remote.
    g = await add(stack, alpha.rw, user_fact("Prefer squash merges"))
    await confirm(stack, alpha.rw, g, B, [B, "git.internal/mirror"])
    await confirm(stack, alpha.rw, g, C, [C, "git.internal/mirror"])
    assert await candidates(stack, alpha.ro) == []
    # A third project with nothing in common makes it a candidate.
    await confirm(stack, alpha.rw, g, A, [A])
    (cand,) = await candidates(stack, alpha.ro)
    assert cand["fact"]["id"] == g and cand["projects"] == [A, B, C]


async def test_a_dispute_after_the_confirm_takes_it_out(stack, two_banks):
    alpha, _ = two_banks
    f = await add(stack, alpha.rw, user_fact("Pin every dependency to an exact version"))
    await confirm(stack, alpha.rw, f, A, [A])
    await confirm(stack, alpha.rw, f, B, [B])
    assert [c["fact"]["id"] for c in await candidates(stack, alpha.ro)] == [f]
    r = await stack.ingest.post(f"/v1/facts/{f}/dispute", json={"reason": "not in web"},
                                headers=auth(alpha.rw))
    assert r.status_code == 200
    assert await candidates(stack, alpha.ro) == []
    # Confirmed again in both after the dispute: it has held since.
    await confirm(stack, alpha.rw, f, A, [A])
    assert await candidates(stack, alpha.ro) == []
    await confirm(stack, alpha.rw, f, B, [B])
    assert [c["fact"]["id"] for c in await candidates(stack, alpha.ro)] == [f]


async def test_a_same_claim_fact_of_the_other_project_counts_a_correction_does_not(
    stack, two_banks
):
    alpha, _ = two_banks
    # The same text, saved in each project (a fact is per project: two rows).
    a1 = await add(stack, alpha.rw, user_fact("The deploy script lives in scripts/deploy.sh", A))
    b1 = await add(stack, alpha.rw, user_fact("The deploy script lives in scripts/deploy.sh", B))
    assert a1 != b1
    await confirm(stack, alpha.rw, a1, A, [A])
    await confirm(stack, alpha.rw, b1, B, [B])
    # Reworded, the same claim (claims.compare on near neighbours).
    a2 = await add(stack, alpha.rw, user_fact("Use pnpm, never npm", A))
    b2 = await add(stack, alpha.rw, user_fact("We use pnpm, not npm", B))
    await confirm(stack, alpha.rw, a2, A, [A])
    await confirm(stack, alpha.rw, b2, B, [B])
    # Near-identical, opposite claims: two facts, two projects, no rule.
    a3 = await add(stack, alpha.rw, user_fact("The API listens on port 8080", A))
    b3 = await add(stack, alpha.rw, user_fact("The API listens on port 8081", B))
    await confirm(stack, alpha.rw, a3, A, [A])
    await confirm(stack, alpha.rw, b3, B, [B])
    found = {frozenset(e["fact_id"] for e in c["evidence"]): c
             for c in await candidates(stack, alpha.ro)}
    assert set(found) == {frozenset({a1, b1}), frozenset({a2, b2})}
    for c in found.values():
        assert c["projects"] == [A, B] and c["fact"]["id"] in {e["fact_id"] for e in c["evidence"]}


async def test_a_stale_or_flagged_fact_is_no_candidate(stack, two_banks):
    alpha, _ = two_banks
    f = await add(stack, alpha.rw, fact_body(
        "CI caches node_modules between runs", source={"kind": "file",
        "location": ".github/workflows/ci.yml:20"}, quote="cache: node_modules", project=A))
    await confirm(stack, alpha.rw, f, A, [A])
    await confirm(stack, alpha.rw, f, B, [B])
    assert [c["fact"]["id"] for c in await candidates(stack, alpha.ro)] == [f]
    r = await stack.ingest.post("/v1/facts/verify", json={"results": [
        {"id": f, "verdict": "stale", "reason": "the quote is gone"}]}, headers=auth(alpha.rw))
    assert r.status_code == 200, r.text
    assert await candidates(stack, alpha.ro) == []


async def test_remotes_and_projects_on_a_confirm_are_bounded_and_redacted(
    stack, two_banks, conn
):
    alpha, _ = two_banks
    key = "AKIAQ7R2X9KD4M3ZTB5W"
    f = await add(stack, alpha.rw, user_fact("Tabs, not spaces, in Makefiles"))
    await confirm(stack, alpha.rw, f, f"{A}/{key}", [f"https://{key}@example.com/x.git"])
    row = await conn.fetchrow(
        "SELECT project, remotes::text AS remotes FROM fact_events WHERE kind = 'confirmed'")
    assert key not in row["project"] and key not in row["remotes"]
    assert "[REDACTED:" in row["project"]
    for body, field in [({"remotes": ["r"] * 21}, "remotes"), ({"project": "p" * 301}, "project"),
                        ({"remotes": ["r" * 301]}, "remotes")]:
        r = await stack.ingest.post(f"/v1/facts/{f}/confirm", json=body, headers=auth(alpha.rw))
        assert r.status_code == 400 and field in r.text, r.text
