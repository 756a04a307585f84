"""Which hits a prompt block may hold (inject.prompt_hits): the margin is measured from the best
hit that may be injected, and that hit must have cleared the gate itself."""

from __future__ import annotations

from datetime import UTC, datetime

from factbank.models import Author, Fact, Hit, Review, Source, Stale
from factbank.read.inject import PROMPT_MARGIN, prompt_hits

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _hit(fid: int, score: float, *, companion: bool = False, status: str = "active",
         trust: float = 0.9, review: bool = False) -> Hit:
    fact = Fact(
        id=fid, bank="b", content=f"fact {fid}", category="fact", tags=[],
        source=Source(kind="url", location="https://example.org"), quote="q", project=None,
        origin="agent", tentative=False, trust=trust, effective_trust=trust, status=status,
        superseded_by=None, supersede_reason=None, created_by=Author(member="m", agent="a"),
        created_at=NOW, updated_at=NOW, confirmed_at=NOW,
        stale=Stale(reason="quote gone", context="", since=NOW) if status == "stale" else None,
        review=Review(reason="cited fact changed", cause=1, since=NOW) if review else None,
    )
    return Hit(fact=fact, score=score, relevance=score, companion=companion)


def ids(hits: list[Hit]) -> list[int]:
    return [h.fact.id for h in hits]


def test_hits_within_the_margin_of_the_best_are_kept_seen_ones_left_out():
    hits = [_hit(1, 0.90), _hit(2, 0.90 - PROMPT_MARGIN / 2), _hit(3, 0.90 - 2 * PROMPT_MARGIN)]
    assert ids(prompt_hits(hits, set())) == [1, 2]
    assert ids(prompt_hits(hits, {1})) == [2]


def test_a_companion_ranked_above_its_gated_hit_comes_along():
    # Ranking adds trust and project to the fused score, so a companion may rank first.
    hits = [_hit(1, 0.80, companion=True), _hit(2, 0.795)]
    assert ids(prompt_hits(hits, set())) == [1, 2]


def test_nothing_when_no_hit_cleared_the_gate():
    assert prompt_hits([_hit(1, 0.5, companion=True), _hit(2, 0.49, companion=True)], set()) == []
    assert prompt_hits([], set()) == []


def test_a_stale_best_hit_does_not_let_its_companions_in():
    # Before: the margin came from the stale best hit, so a companion just under it was injected.
    hits = [_hit(1, 0.80, status="stale"), _hit(2, 0.795, companion=True)]
    assert prompt_hits(hits, set()) == []


def test_a_flagged_best_hit_is_skipped_and_the_next_gated_hit_sets_the_margin():
    hits = [_hit(1, 0.95, review=True), _hit(2, 0.80), _hit(3, 0.80 - PROMPT_MARGIN / 2),
            _hit(4, 0.79, companion=True)]
    # Fact 2 cleared the gate: it and fact 3 are within the margin of 2, not of the flagged 1.
    # A companion within the margin of a gated hit comes along, as on any query.
    assert ids(prompt_hits(hits, set())) == [2, 3, 4]


def test_low_trust_facts_are_never_injected():
    hits = [_hit(1, 0.9, trust=0.05), _hit(2, 0.89)]
    assert ids(prompt_hits(hits, set())) == [2]
