"""`store.nearest.nearest_own` answers what an exact scan answers, by either road (the exact
scan over a few matching facts, or the HNSW graph with the filter checked on each vector it
yields), in a bank whose nearest vectors all belong to other categories, projects or statuses,
and when fewer facts match than were asked for.
"""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest
from pgvector.asyncpg import register_vector

from factbank.store import nearest

DIM = 384


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


async def bank_with(conn: asyncpg.Connection, rows: list[tuple[str, str | None, str]],
                    vectors: np.ndarray) -> tuple[int, list[int]]:
    """A bank with one fact per (category, project, status) row, each with its own vector."""
    bank = await conn.fetchval("INSERT INTO banks (name, kind) VALUES ('near', 'personal') "
                               "RETURNING id")
    member = await conn.fetchval("INSERT INTO members (bank_id, name) VALUES ($1, 'm') "
                                 "RETURNING id", bank)
    await conn.execute("INSERT INTO categories (bank_id, name) VALUES ($1, 'project'), "
                       "($1, 'decision') ON CONFLICT DO NOTHING", bank)
    ids = []
    for i, ((category, project, status), v) in enumerate(zip(rows, vectors, strict=True)):
        fid = await conn.fetchval(
            """INSERT INTO facts (bank_id, content, category, project, status, source_kind,
                                  quote, origin, trust, created_by_member, content_hash)
               VALUES ($1, $2, $3, $4, $5, 'user', 'q', 'user', 0.9, $6, $7) RETURNING id""",
            bank, f"fact {i}", category, project, status, member, f"h{i}".encode())
        await conn.execute("INSERT INTO fact_vectors (fact_id, bank_id, ord, lang, embedding) "
                           "VALUES ($1, $2, 0, 'en', $3)", fid, bank, v)
        ids.append(fid)
    return bank, ids


def exact(q: np.ndarray, vectors: np.ndarray, ids: list[int], keep: list[bool],
          k: int = 5) -> list[int]:
    """The k ids nearest q among those kept, by cosine, computed here."""
    sims = vectors @ q
    order = sorted((i for i in range(len(ids)) if keep[i]), key=lambda i: (-sims[i], ids[i]))
    return [ids[i] for i in order[:k]]


# The two roads, by FEW: the graph, the exact scan over the few matching facts. In a bank this
# small the planner would sort the whole table rather than walk the graph:
# sorts and sequential scans off make the graph roads take it, as a large bank does.
ROADS = {"graph": 0, "few": 1000}


@pytest.mark.parametrize("road", ROADS)
@pytest.mark.parametrize("matching", [40, 3])
async def test_the_nearest_matching_facts_whatever_is_nearer_elsewhere(
        conn, monkeypatch, road, matching):
    few = ROADS[road]
    monkeypatch.setattr(nearest, "FEW", few)
    for setting in ("enable_sort", "enable_seqscan"):
        await conn.execute(f"SET {setting} = {'off' if few == 0 else 'on'}")
    await register_vector(conn)
    rng = np.random.default_rng(11)
    q = unit(rng.normal(size=DIM))
    # 210 facts nearer the query than any that matches (more than one pass of the graph
    # reads, ef_search): another category, another project, the same place retired; then the
    # matching ones, further away.
    elsewhere = [("decision", None, "active"), ("project", "web", "active"),
                 ("project", None, "superseded")] * 70
    rows = elsewhere + [("project", None, "active")] * matching
    near = unit(q + 0.3 * unit(rng.normal(size=(len(elsewhere), DIM))))
    far = unit(q + 1.0 * unit(rng.normal(size=(matching, DIM))))
    vectors = np.concatenate([near, far])
    bank, ids = await bank_with(conn, rows, vectors)

    got = await nearest.nearest_own(conn, bank, q, place=("project", None),
                                    statuses=("active", "disputed"))
    keep = [r == ("project", None, "active") for r in rows]
    assert [r["id"] for r in got] == exact(q, vectors, ids, keep)
    assert len(got) == min(5, matching)
    assert [round(r["similarity"], 5) for r in got] == [
        round(float(vectors[ids.index(r["id"])] @ q), 5) for r in got]

    # A project named, and no place but a fact left out (the misses' repeats).
    got = await nearest.nearest_own(conn, bank, q, place=("project", "web"))
    keep = [r[:2] == ("project", "web") for r in rows]
    assert [r["id"] for r in got] == exact(q, vectors, ids, keep)
    nearest_id = exact(q, vectors, ids, [True] * len(ids), 1)[0]
    got = await nearest.nearest_own(conn, bank, q, statuses=("active",), exclude=nearest_id)
    keep = [r[2] == "active" and i != nearest_id for r, i in zip(rows, ids, strict=True)]
    assert [r["id"] for r in got] == exact(q, vectors, ids, keep)
