"""The rule-promotion gate: which facts have held in at least two unrelated
projects, and the evidence. A second gate, because a rule file (AGENTS.md, CLAUDE.md) is read
by every session of every project: one project's habit must not become everyone's rule.

Evidence is a confirm event made from a project (`fact_events.project`, sent by the client that
confirmed, with its repository's remotes), on a fact that still holds (active, not under
review) and with no dispute of that fact after it. A claim collects the evidence of every fact
that makes it: the same normalised text (content hash), or near neighbours (cosine >=
`claims.NEAR` of their own vectors) that `claims.compare` calls the same claim
(docs/principles.md#corrections-do-not-reinforce:
"port 8080" confirmed in one project and "port 8081" in another are two claims, not one rule).

Two projects are unrelated when their keys differ and their remote sets share nothing: a
project's set is its key plus every remote recorded on its confirms, so a fork (whose clone
has the upstream as a remote) and its upstream are one project here. A claim with at least one
unrelated pair is a candidate; it is answered as its best-evidenced fact (most projects, then
trust), with every piece of evidence (project, fact id, confirm event id and time, member,
agent), latest confirm per project and fact.

The gate only proposes: this module reads, the client writes a patch a person merges
(`factbank rules propose`); nothing here or anywhere in the server edits a rule file.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import UTC, datetime
from itertools import combinations

import asyncpg
import numpy as np

from factbank.models import Evidence, RuleCandidate
from factbank.store import facts
from factbank.text import claims, embedder
from factbank.text.claims import NEAR

MAX_EVENTS = 10_000  # confirm events read per request (the newest)

_EVIDENCE = """
SELECT e.id AS event_id, e.fact_id, e.project, e.remotes, e.created_at AS at,
       m.name AS member, e.agent
FROM fact_events e
JOIN facts f ON f.id = e.fact_id
LEFT JOIN members m ON m.id = e.member_id
WHERE e.bank_id = $1 AND e.kind = 'confirmed' AND coalesce(e.project, '') <> ''
  AND f.bank_id = $1 AND f.status = 'active' AND f.review_since IS NULL
  AND NOT EXISTS (SELECT 1 FROM fact_events d
                  WHERE d.fact_id = e.fact_id AND d.kind = 'disputed' AND d.id > e.id)
ORDER BY e.id DESC LIMIT $2
"""


def _key(text: str) -> str:
    return text.strip().casefold()


def unrelated(sets: dict[str, set[str]]) -> bool:
    """Some two projects have different keys and disjoint remote sets."""
    return any(_key(a) != _key(b) and not (sets[a] & sets[b]) for a, b in combinations(sets, 2))


def _claims(rows: dict[int, dict]) -> list[list[int]]:
    """The evidence facts grouped by the claim they make (union-find over same content hash,
    and near neighbours that `claims.compare` calls the same claim)."""
    ids = sorted(rows)
    parent = {i: i for i in ids}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    by_hash: dict[bytes, int] = {}
    for i in ids:
        h = bytes(rows[i]["content_hash"])
        if h in by_hash:
            union(i, by_hash[h])
        else:
            by_hash[h] = i
    with_vec = [i for i in ids if rows[i]["embedding"] is not None]
    if len(with_vec) > 1:
        m = np.stack([embedder.as_array(rows[i]["embedding"]) for i in with_vec])
        m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
        sims = m @ m.T
        for a, b in zip(*np.nonzero(np.triu(sims >= NEAR, k=1)), strict=True):
            x, y = with_vec[int(a)], with_vec[int(b)]
            if (
                find(x) != find(y)
                and claims.compare(rows[x]["content"], rows[y]["content"]).same_claim
            ):
                union(x, y)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in ids:
        groups[find(i)].append(i)
    return list(groups.values())


async def candidates(conn: asyncpg.Connection, bank_id: int) -> list[RuleCandidate]:
    """Every claim of this bank that passed the gate, most projects first."""
    events = await conn.fetch(_EVIDENCE, bank_id, MAX_EVENTS)
    if not events:
        return []
    rows = {
        r["id"]: dict(r)
        for r in await conn.fetch(
            facts.FACT_SELECT + " WHERE f.bank_id = $1 AND f.id = ANY($2::bigint[])",
            bank_id,
            sorted({e["fact_id"] for e in events}),
        )
    }
    # Each fact's own vector, from the one vector store (fact_vectors ord 0; none: queued).
    own = dict(await conn.fetch(
        "SELECT fact_id, embedding FROM fact_vectors WHERE fact_id = ANY($1::bigint[]) "
        "AND ord = 0",
        list(rows),
    ))
    for fact_id, row in rows.items():
        row["embedding"] = own.get(fact_id)
    groups = await asyncio.to_thread(_claims, rows)
    by_fact: dict[int, list] = defaultdict(list)
    for e in events:
        by_fact[e["fact_id"]].append(e)
    now = datetime.now(UTC)
    out: list[RuleCandidate] = []
    for group in groups:
        latest: dict[tuple[str, int], asyncpg.Record] = {}
        sets: dict[str, set[str]] = defaultdict(set)
        for fact_id in group:
            for e in by_fact[fact_id]:  # newest first
                latest.setdefault((e["project"], fact_id), e)
                sets[e["project"]] |= {_key(e["project"]), *(_key(r) for r in e["remotes"])}
        if not unrelated(sets):
            continue
        projects_of: dict[int, set[str]] = defaultdict(set)
        for project, fact_id in latest:
            projects_of[fact_id].add(project)
        best = max(group, key=lambda i: (len(projects_of[i]), rows[i]["trust"], -i))
        evidence = [
            Evidence(
                project=e["project"],
                fact_id=fact_id,
                event_id=e["event_id"],
                at=e["at"],
                member=e["member"],
                agent=e["agent"],
            )
            for (_, fact_id), e in sorted(latest.items(), key=lambda kv: kv[1]["event_id"])
        ]
        out.append(
            RuleCandidate(
                fact=facts.to_fact(rows[best], now),
                projects=sorted(sets),
                evidence=evidence,
            )
        )
    return sorted(out, key=lambda c: (-len(c.projects), c.fact.id))
