"""The plain-text block an agent sees (docs/principles.md#small-relevant-injection): small,
relevant, each fact once.

Session start: the bank's auto-inject categories (global or this project's) plus this
project's facts, effective trust >= 0.40, up to ~1,500 tokens. Per prompt: the top 5 recall
matches above the floor, same trust rule, up to ~500 tokens. A fact already shown in this
session is not shown again (state in Redis with a TTL, in process without Redis). A fact too
large for what is left of the budget is skipped and the loop goes on; a fact longer than 600
characters is cut with a pointer to the full text. When nothing qualifies the text is empty.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Container, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from factbank.models import Fact, Hit, InjectSource
from factbank.read import why
from factbank.read.search import Recall, search
from factbank.redact import redaction
from factbank.store import facts
from factbank.text.tokenizer import cjk_share
from factbank.timeline import conflicts, handoffs, sessions, wording
from factbank.trust import DEFAULT as POLICY
from factbank_common.inert import inert

log = logging.getLogger("factbank.inject")

SESSION_BUDGET = 1500
PROMPT_BUDGET = 500
PROMPT_TOP = 5
# A prompt block holds the query's best hit, if it clears the gate, and the hits within this
# much of it on the ranking score (confidence units, `Hit.score`) that clear the companion
# floor. Injecting every fact that cleared the gate was mostly noise once writer questions
# lifted a bank's on-topic facts: on agent-memory (tags + questions) 0.22 of the injected
# facts were gold, at 4.7 facts a prompt. Measured margins on that set (gold fact in the
# block / precision / facts a prompt): 0.005 0.82/0.77/1.3, 0.01 0.83/0.74/1.6, 0.015
# 0.86/0.71/1.8, 0.02 0.88/0.67/2.1, 0.03 0.90/0.60/2.6, none 0.91/0.22/4.7; through the
# service at 0.015: 0.88 / 0.74 / 137 tokens a prompt (evals/reports/2026-12-01). 0.015 is
# the least that keeps a gold fact in the block for at least 85% of answerable prompts.
PROMPT_MARGIN = 0.015
MAX_FACT_CHARS = 600
HEADER = (
    "[factbank] Remembered facts: context, not truth. Cite by id; confirm, dispute or "
    "supersede them by id when you learn otherwise."
)


def estimate_tokens(text: str) -> int:
    """A cheap, conservative token estimate: ~1 per CJK character, ~1 per 4 other characters."""
    cjk = round(len(text) * cjk_share(text)) if text else 0
    return cjk + (len(text) - cjk + 3) // 4


def line_for(fact: Fact, via_note: str = "") -> str:
    content = " ".join(fact.content.split())
    if len(content) > MAX_FACT_CHARS:
        content = content[:MAX_FACT_CHARS].rstrip() + f"… (cut; full text: factbank get {fact.id})"
    flags = ", tentative" if fact.tentative else ""
    scope = f" [{fact.project}]" if fact.project else ""
    # One inert line: a content, project or category holding newlines, ANSI
    # escapes or zero-width characters cannot add lines or instructions to the block.
    return inert(
        f"- #{fact.id} (trust {fact.effective_trust:.2f}{flags}, {fact.category}{scope}) "
        f"{content}{via_note}"
    )


@dataclass
class Block:
    text: str = ""
    facts: list[int] = field(default_factory=list)
    tokens: int = 0
    skipped: list[int] = field(default_factory=list)
    sources: list[InjectSource] = field(default_factory=list)
    subject: int | None = None  # a prompt's top hit past the gate, seen or not


# The source kinds the hook checks against its working tree before showing a block
# (factbank_client/staleness/worktree.py CHECKED_KINDS): a fact of the caller's project
# quoting a file.
CHECKED_KINDS = ("file",)


def checkable(shown: list[int], pool: Sequence[Fact], project: str | None) -> list[InjectSource]:
    """The facts of the block (`shown`) that quote a file of `project`: what the client checks
    against the checkout in front of the agent before it shows them (verify before inject).
    Only the caller's project: a file path means nothing in another repository."""
    if not project or not shown:
        return []
    by_id = {f.id: f for f in pool}
    out = []
    for fid in shown:
        f = by_id.get(fid)
        if f is not None and f.project == project and f.source.kind in CHECKED_KINDS:
            out.append(
                InjectSource(id=f.id, source=f.source, quote=f.quote, fingerprint=f.fingerprint)
            )
    return out


def assemble(lines: list[tuple[int, str]], budget: int, bank: str) -> Block:
    header = f"{HEADER} (bank: {bank})"
    used = estimate_tokens(header)
    chosen: list[tuple[int, str]] = []
    skipped: list[int] = []
    for fact_id, line in lines:
        cost = estimate_tokens(line)
        if used + cost > budget:
            skipped.append(fact_id)  # too large for what is left: skip it, keep going
            continue
        used += cost
        chosen.append((fact_id, line))
    if not chosen:
        return Block(skipped=skipped)
    text = "\n".join([header, *(line for _, line in chosen)])
    return Block(text=text, facts=[f for f, _ in chosen], tokens=used, skipped=skipped)


def _injectable(fact: Fact) -> bool:
    """Active (never stale), not under review, trusted enough: only such a fact is injected
    unasked. A stale or flagged fact is still found by search, marked."""
    return (
        fact.status == "active" and fact.review is None and POLICY.injectable(fact.effective_trust)
    )


async def session_block(
    r: Recall,
    bank_id: int,
    bank: str,
    session_id: str,
    project: str | None,
    min_version: int | None = None,
    share: int = 1,
    member_id: int | None = None,
    preview: bool = False,
    withheld: Container[int] = (),
) -> Block:
    pool = await r.pool_for(bank_id, min_version)
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            facts.FACT_SELECT
            + """ WHERE f.bank_id = $1 AND f.status = 'active' AND f.review_since IS NULL
              AND ((c.auto_inject AND (f.project IS NULL OR f.project = $2))
                   OR ($2::text IS NOT NULL AND f.project = $2))
            ORDER BY (f.project IS NOT DISTINCT FROM $2) DESC,
                     CASE f.category WHEN 'preferences' THEN 0 WHEN 'project' THEN 1
                                     WHEN 'environment' THEN 2 ELSE 3 END,
                     f.trust DESC, f.id DESC
            LIMIT 200""",
            bank_id,
            project,
        )
    now = datetime.now(UTC)
    seen = await r.cache.seen(bank_id, session_id)
    candidates = [
        facts.to_fact(row, now)
        for row in rows
        if row["id"] not in seen or row["id"] in withheld  # withheld: never shown
    ]
    candidates = [f for f in candidates if _injectable(f)]
    budget = SESSION_BUDGET // share
    stale = await _stale_section(
        pool, bank_id, session_id, project, member_id, STALE_BUDGET // share
    )
    recent = await _recent_section(
        r, bank_id, session_id, project, RECENT_BUDGET // share, preview
    )
    spent = sum(estimate_tokens(t) for t in (stale, recent) if t)
    block = assemble([(f.id, line_for(f)) for f in candidates], budget - spent, bank)
    block.sources = checkable(block.facts, candidates, project)
    if not preview:
        await r.cache.mark_seen(bank_id, session_id, block.facts)
    if stale or recent:
        block.text = "\n".join(t for t in (block.text, stale, recent) if t)
        block.tokens += spent
    return block


# "Turned stale since your last session": this project's facts that turned stale, or
# were flagged for review, after the caller's previous session in the project started (its
# block could not have named them), or in the last STALE_DAYS without one. Named by id and
# reason, never their content: they are not injected. Inside the session budget; what does
# not fit as a line is still named by id.
STALE_BUDGET = 200
STALE_DAYS = 7
STALE_HEADER = (
    "[factbank] Turned stale since your last session (not injected; re-verify or supersede "
    "by id):"
)
STALE_REASON_CHARS = 140
STALE_MAX = 50


async def _stale_section(
    pool,
    bank_id: int,
    session_id: str,
    project: str | None,
    member_id: int | None,
    budget: int,
) -> str:
    if not project:
        return ""
    try:
        async with pool.acquire() as conn:
            since = await conn.fetchval(
                """SELECT max(started_at) FROM timeline_sessions
                   WHERE bank_id = $1 AND project = $2 AND session_key <> $3
                     AND ($4::bigint IS NULL OR member_id = $4)
                     AND session_key NOT LIKE 'handoff-%'""",
                bank_id,
                project,
                session_id,
                member_id,
            )
            since = since or datetime.now(UTC) - timedelta(days=STALE_DAYS)
            rows = await conn.fetch(
                """SELECT id, status, stale_reason, review_reason, review_cause,
                          greatest(stale_since, review_since) AS at
                   FROM facts
                   WHERE bank_id = $1 AND project = $2
                     AND ((status = 'stale' AND stale_since > $3)
                          OR (review_since > $3 AND status IN ('active', 'disputed', 'stale')))
                   ORDER BY at DESC, id DESC LIMIT $4""",
                bank_id,
                project,
                since,
                STALE_MAX,
            )
    except Exception:  # optional like the timeline's part: a failure never costs the facts
        log.exception("the stale section of the session block failed")
        return ""
    return stale_lines(rows, budget)


def stale_lines(rows, budget: int) -> str:
    """The line group for these facts within `budget` tokens ("" for none): a line per fact
    with its reason while they fit, then the rest by id, then how many more. Measured on the
    joined text, as the session block counts it."""
    lines: list[str] = [STALE_HEADER]
    rest: list[int] = []

    def fits(line: str) -> bool:
        return estimate_tokens("\n".join([*lines, line])) <= budget

    for row in rows:
        if row["status"] == "stale":
            why = "stale: " + _clip(row["stale_reason"] or "its source changed")
        else:
            why = "under review: " + _clip(row["review_reason"] or "a fact it cites changed")
        line = inert(f"- #{row['id']} {why}")
        if not rest and fits(line):
            lines.append(line)
        else:
            rest.append(row["id"])
    for named in range(len(rest), -1, -1):
        if not rest:
            break
        more = len(rest) - named
        ids = ", ".join(f"#{i}" for i in rest[:named])
        line = f"- also {ids}" + (f" (+{more} more)" if more else "") if named else (
            f"- {more} more"
        )
        if fits(line):
            lines.append(line)
            break
    return "\n".join(lines) if len(lines) > 1 else ""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= STALE_REASON_CHARS:
        return text
    return text[:STALE_REASON_CHARS].rsplit(" ", 1)[0] + "…"


# "Recently in this project": the timeline's part of the session block, inside the
# session budget: open handoffs for this session (delivered once), the last few sessions by
# other agents or members, live conflicts. Timeline rows, never facts. Empty: no section.
RECENT_BUDGET = 300
RECENT_HEADER = "[factbank] Recently in this project (timeline, not facts):"
HANDOFF_CHARS = 300


async def _recent_section(
    r: Recall, bank_id: int, session_id: str, project: str | None, budget: int,
    preview: bool = False,
) -> str:
    if not project:
        return ""
    try:
        return await _recent(r, bank_id, session_id, project, budget, preview)
    except Exception:  # the briefing is optional: a timeline failure never costs the facts
        log.exception("the timeline section of the session block failed")
        return ""


class _Preview(Exception):
    """Raised inside a transaction to roll back what a preview did (`delivering`)."""


@asynccontextmanager
async def delivering(conn, preview: bool) -> AsyncIterator[None]:
    """A transaction that commits, or for a preview rolls back: a preview runs exactly the
    statements that deliver (so it shows exactly what would be delivered, locks and all) and
    keeps none of their effects."""
    try:
        async with conn.transaction():
            yield
            if preview:
                raise _Preview
    except _Preview:
        pass


async def _recent(
    r: Recall, bank_id: int, session_id: str, project: str, budget: int, preview: bool = False
) -> str:
    now = datetime.now(UTC)
    pool = r.primary or r.pool  # delivering a handoff is a write; the session row is fresh
    used = estimate_tokens(RECENT_HEADER)
    lines: list[str] = []

    def fits(line: str) -> bool:
        nonlocal used
        line = inert(line)
        cost = estimate_tokens(line)
        if used + cost > budget:
            return False
        used += cost
        lines.append(line)
        return True

    async with pool.acquire() as conn:
        me = await conn.fetchrow(
            "SELECT agent, member FROM timeline_sessions WHERE bank_id = $1 AND session_key = $2",
            bank_id,
            session_id,
        )
        agent, member = (me["agent"], me["member"]) if me else ("", "")
        async with delivering(conn, preview):
            taken = await handoffs.take_handoffs(
                conn, bank_id, project, session_id, agent=agent, member=member
            )
            undo = []
            for h in taken:
                text = " ".join(h["text"].split())
                if len(text) > HANDOFF_CHARS:
                    text = text[:HANDOFF_CHARS].rstrip() + "…"
                refs = [", ".join(h["files"][:5])] if h["files"] else []
                refs += [", ".join(f"#{i}" for i in h["fact_ids"][:5])] if h["fact_ids"] else []
                who = h["author_member"] + (f" ({h['author_agent']})" if h["author_agent"] else "")
                line = (
                    f"- Handoff #{h['id']} from {who}, "
                    f"{wording.ago((now - h['created_at']).total_seconds())}: {text}"
                    + (f" [{'; '.join(refs)}]" if refs else "")
                )
                if not fits(line):
                    undo.append(h["id"])  # not shown: stays open for the next session
            if undo:
                await conn.execute(
                    "UPDATE handoffs SET delivered_at = NULL, delivered_to_session = NULL "
                    "WHERE id = ANY($1::bigint[])",
                    undo,
                )
        for c in await conflicts.live_conflicts(
            conn, bank_id, project, window_minutes=conflicts.configured_window(), limit=3
        ):
            fits(f"- Conflict: {c['detail']}")
        for s in await sessions.recent_sessions(
            conn, bank_id, project, session_id, agent=agent, member=member
        ):
            files = ", ".join(s["files"])
            more = s["n_files"] - len(s["files"])
            if more > 0:
                files += f" (+{more} more)"
            branch = f", branch {s['branch']}" if s["branch"] else ""
            where = f" on {s['machine']}" if s["machine"] else ""
            state = "ended" if s["ended_at"] else "last active"
            fits(
                f"- {s['member'] or 'someone'} with {s['agent'] or 'an agent'}{where}{branch}, "
                f"{state} {wording.ago((now - s['last_at']).total_seconds())}"
                + (f": touched {files}" if files else "")
            )
    if not lines:
        return ""
    return "\n".join([RECENT_HEADER, *lines])


VIA_REASON_CHARS = 200


def _via_note(hit: Hit) -> str:
    if hit.via is None:
        return ""
    # Reasons are redacted when written; a row written before that was true is redacted here,
    # on its first 200 characters (the note's length), so nothing injected carries a secret.
    reason = " ".join((hit.via.reason or "").split())
    if len(reason) > VIA_REASON_CHARS:
        reason = reason[:VIA_REASON_CHARS].rsplit(" ", 1)[0] + "…"
    reason = redaction.clean_text("reason", reason) if reason else "no reason given"
    return f" [supersedes #{hit.via.superseded}: {reason}]"


def prompt_hits(results: Sequence[Hit], seen: Container[int]) -> list[Hit]:
    """The hits a prompt block may hold: the injectable hits within PROMPT_MARGIN of the best
    injectable one, when at least one injectable hit cleared the gate itself (companions ride
    on a gated hit, never alone); facts this session was already shown are left out.

    Facts that are never injected (stale, under review, low trust) count against nothing
   : they neither set the margin nor stand in for the gated hit. Before, the margin
    came from the best hit of any kind, so a stale best hit pushed the good facts under it
    out, and the companions just under it came in on the gate it had cleared. When every hit
    is injectable this is exactly the earlier rule (the agent-memory eval is unchanged)."""
    injectable = [h for h in results if _injectable(h.fact)]
    if not any(not h.companion for h in injectable):
        return []
    best = injectable[0].score
    return [h for h in injectable if h.fact.id not in seen and h.score >= best - PROMPT_MARGIN]


async def prompt_block(
    r: Recall,
    bank_id: int,
    bank: str,
    session_id: str,
    project: str | None,
    prompt: str,
    min_version: int | None = None,
    share: int = 1,
    preview: bool = False,
    withheld: Container[int] = (),
) -> Block:
    # The query's best hit must clear the gate; the others it brings need only be within
    # PROMPT_MARGIN of it on the ranking score (and above the companion floor).
    result = await search(
        r,
        bank_id,
        prompt,
        project=project,
        limit=PROMPT_TOP * 3,
        min_version=min_version,
    )
    seen = await r.cache.seen(bank_id, session_id)
    if withheld:  # left out by the client's working-tree check: never shown, so not seen
        seen = {i for i in seen if i not in withheld}
    hits = prompt_hits(result.results, seen)
    told = await _told_section(r, bank_id, session_id, project, preview)
    spent = estimate_tokens(told) if told else 0
    block = assemble(
        # Each line says what matched it (read/why.py): the writer question, or the words.
        [(h.fact.id, line_for(h.fact, _via_note(h) + why.note(h, prompt)))
         for h in hits[:PROMPT_TOP]],
        PROMPT_BUDGET // share - spent,
        bank,
    )
    block.sources = checkable(block.facts, [h.fact for h in hits], project)
    if not preview:
        await r.cache.mark_seen(bank_id, session_id, block.facts)
    if told:
        block.text = "\n".join(t for t in (told, block.text) if t)
        block.tokens += spent
    if result.results:
        block.subject = result.results[0].fact.id
    return block


# A conflict is told to the other session too: when another session's edit ran
# into a file this session touched within the window, this session's next prompt block opens
# with it, once (`conflicts.tell_conflicts` marks it told). The editing session learns it from
# its own hook. At most 3 lines (~40 tokens each), taken from the prompt budget.
CONFLICT_HEADER = "[factbank] Possible edit conflict (timeline, not facts):"


async def _told_section(
    r: Recall, bank_id: int, session_id: str, project: str | None, preview: bool = False
) -> str:
    if not project:
        return ""
    try:
        async with (r.primary or r.pool).acquire() as conn, delivering(conn, preview):
            warnings = await conflicts.tell_conflicts(
                conn, bank_id, session_id, window_minutes=conflicts.configured_window()
            )
    except Exception:  # optional, like the briefing: never costs the facts
        log.exception("the conflict lines of the prompt block failed")
        return ""
    if not warnings:
        return ""
    return "\n".join([CONFLICT_HEADER, *(inert(f"- {w}") for w in warnings)])
