"""Check: what `POST /v1/facts` would do with each of a list of facts, deciding
everything and saving nothing. `factbank migrate-native` shows its candidates this way before
the user accepts any.

The steps are retain's own, never a copy: the write gate under the bank's redaction policy and
category registry (`retain.gating.gated`, derived facts' citations included), then the
duplicate-vs-correction decision (`retain.near.near_duplicates` and `claims.compare`,
docs/principles.md#corrections-do-not-reinforce).
Per fact: "refused" with the reasons, "same_claim" with the fact a save would reinforce,
"retired" with the superseded or deleted fact that made the claim (a save stores nothing), or
"new" with the facts it may supersede; and what redaction would remove (field and kind, never
the text).

Nothing is written, held by the database itself: the whole check runs in a READ ONLY
transaction, and embeddings the cache lacks are computed without being cached
(`embed_passages(store=False)`). Each fact is judged against the bank as it stands, not
against the others in the same list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from factbank.models import CheckVerdict, NewFact
from factbank.store.banks import Principal
from factbank.text import claims, embedder, lexicon
from factbank.write.deps import Deps
from factbank.write.retain.gating import Vectors, gated, redacted
from factbank.write.retain.near import near_duplicates
from factbank.write.retain.retired import retired_match

MAX_CHECK = 200


async def check_many(
    deps: Deps,
    principal: Principal,
    items: Sequence[NewFact],
) -> list[CheckVerdict]:
    """One verdict per item, in order (the gate redacts each with its project, agent and the
    header, or refuses it, as a save would)."""
    out: list[CheckVerdict | None] = [None] * len(items)
    async with deps.pool.acquire() as conn, conn.transaction(readonly=True):
        prepared, errors = await gated(conn, deps, principal, items)
        refused = {e["index"]: e["reasons"] for e in errors}
        ok = [(k, p) for k, p in enumerate(prepared) if p is not None]
        vectors = [Vectors() for _ in ok]
        if deps.embedder is not None and ok:
            texts = [lexicon.indexed_text(p.content, p.tags) for _, p in ok]
            found = await embedder.embed_passages(conn, deps.embedder, texts, store=False)
            vectors = [Vectors(v) for v in found]
        for (i, p), v in zip(ok, vectors, strict=True):
            verdict = CheckVerdict(verdict="new", redacted=redacted(p))
            for old in await near_duplicates(conn, principal.bank_id, p, v):
                same = await asyncio.to_thread(claims.compare, p.content, old["content"])
                if same.same_claim:
                    verdict.verdict, verdict.same_as = "same_claim", old["id"]
                    verdict.possible_duplicate_of = []
                    break
                verdict.possible_duplicate_of.append(old["id"])
            if verdict.verdict == "new" and (
                retired := await retired_match(conn, principal.bank_id, p, v)
            ) is not None:
                verdict.verdict, verdict.same_as = "retired", retired
            out[i] = verdict
    for i, reasons in refused.items():
        out[i] = CheckVerdict(verdict="refused", reasons=reasons)
    return [v for v in out if v is not None]
