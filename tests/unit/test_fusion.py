"""fuse() on constructed legs and backgrounds: what each rule is for, one rule per test.

Scores are made up but in the ranges measured on the dev sets (e5-small cosines 0.70-0.95,
background means 0.70-0.82, BM25 a few to a few dozen), so a test breaks when a rule stops
doing its job, not when a constant moves by a hair.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from factbank.read.fusion import (
    DEFAULT,
    Background,
    BackgroundEntry,
    BackgroundVectors,
    Candidates,
    Gated,
    LegHit,
    Passed,
    apply_floor,
    background_texts,
    companion_floor,
    fuse,
    language_pair,
    load_background,
    raw_scores,
    relevance,
)
from factbank.text.tokenizer import cjk_share, language

GATE = DEFAULT.floor  # one gate for every language: the pair is folded into each score


def dense(*pairs: tuple[int, float]) -> list[LegHit]:
    return [LegHit(fid, score) for fid, score in pairs]


def lexical(*triples: tuple[int, float, int]) -> list[LegHit]:
    return [LegHit(fid, score, matched) for fid, score, matched in triples]


def fuse_legs(*legs_and_query, **facts) -> list[tuple[int, float]]:
    return fuse(Candidates(*legs_and_query, **facts))


def score_legs(*legs_and_query, cohort=None, **facts) -> list[tuple[int, float]]:
    return raw_scores(Candidates(*legs_and_query, **facts), cohort=cohort)


def ids(fused: list[tuple[int, float]] | Gated) -> list[int]:
    """The fact ids of fused scores, or of what the gate let through."""
    if isinstance(fused, Gated):
        return [p.fact_id for p in fused.passed]
    return [fid for fid, _ in fused]


def bg(zh: float, en: float, zh_tagged: float | None = None,
       en_tagged: float | None = None) -> Background:
    """A query's background means (plain zh, plain en, and the tagged forms)."""
    return Background({
        ("zh", False): zh,
        ("en", False): en,
        ("zh", True): zh if zh_tagged is None else zh_tagged,
        ("en", True): en if en_tagged is None else en_tagged,
    })


# A Chinese query: Chinese text sits ~0.81 from it, English text ~0.72 (measured medians).
ZH_Q = bg(0.81, 0.72, 0.80, 0.79)
# An English query: English text ~0.72, Chinese ~0.70.
EN_Q = bg(0.70, 0.72, 0.78, 0.79)


# --- the shipped background ---------------------------------------------------------------


def test_shipped_background_is_bilingual_parallel_and_tagged():
    entries = load_background()
    zh = [e for e in entries if e.lang == "zh"]
    en = [e for e in entries if e.lang == "en"]
    assert len(zh) == len(en) >= 200
    assert len(zh) + len(en) == len(entries)
    # Labels agree with the product's language detection (the means are keyed by it).
    assert all(language(e.text) == e.lang for e in entries)
    # Varied, not one sentence repeated: every text is distinct.
    assert len({e.text for e in entries}) == len(entries)
    # Tagged like a saved fact: most sentences carry tags in both scripts.
    both = [e for e in entries if any(cjk_share(t) > 0.5 for t in e.tags)
            and any(cjk_share(t) == 0 for t in e.tags)]
    assert len(both) >= 0.8 * len(entries)


def test_background_texts_are_plain_then_tagged():
    entries = [BackgroundEntry("en", "a cat", ("cat", "猫")),
               BackgroundEntry("zh", "一只猫", ("cat", "猫"))]
    assert background_texts(entries) == ["a cat", "一只猫", "a cat\ncat 猫", "一只猫\ncat 猫"]


def test_background_means_per_language_and_form():
    entries = [BackgroundEntry("en", "e1", ()), BackgroundEntry("en", "e2", ()),
               BackgroundEntry("zh", "z1", ())]
    # Orthogonal unit rows, so the cosine to a query is just the query's coordinate.
    vectors = BackgroundVectors.from_vectors(np.eye(6, dtype=np.float32) * 3.0, entries)
    q = np.array([0.2, 0.4, 0.9, 0.1, 0.3, 0.5], dtype=np.float32)
    means = Background.for_query(q, vectors).means
    norm = float(np.linalg.norm(q))
    assert means[("en", False)] == pytest.approx((0.2 + 0.4) / 2 / norm, rel=1e-5)
    assert means[("zh", False)] == pytest.approx(0.9 / norm, rel=1e-5)
    assert means[("en", True)] == pytest.approx((0.1 + 0.3) / 2 / norm, rel=1e-5)
    assert means[("zh", True)] == pytest.approx(0.5 / norm, rel=1e-5)


def test_background_vectors_must_match_the_texts():
    entries = [BackgroundEntry("en", "e", ()), BackgroundEntry("zh", "z", ())]
    with pytest.raises(ValueError):
        BackgroundVectors.from_vectors(np.eye(3, dtype=np.float32), entries)


def test_mixed_fact_takes_the_higher_language_mean():
    # A mixed fact is never credited with a cross-language gap it may not have.
    assert ZH_Q.mean("mixed", False) == 0.81
    assert ZH_Q.mean(None, False) == 0.81
    assert EN_Q.mean("mixed", True) == 0.79


# --- the confidence -----------------------------------------------------------------------


def test_a_facts_relevance_does_not_depend_on_the_rest_of_the_bank():
    # The old margin feature (top1 - top2) made a 6-fact bank look confident by chance.
    # Now a fact's score is its own cosine against the query's background, whatever else
    # the bank holds.
    langs = dict.fromkeys(range(1, 8), "en")
    alone = dict(fuse_legs([], dense((1, 0.80)), 3, "en", langs, background=EN_Q))
    crowd = dict(fuse_legs([], dense((1, 0.80), (2, 0.79), (3, 0.79), (4, 0.78), (5, 0.78)),
                      3, "en", langs, background=EN_Q))
    far = dict(fuse_legs([], dense((1, 0.80), (6, 0.60), (7, 0.55)), 3, "en", langs,
                    background=EN_Q))
    assert alone[1] == crowd[1] == far[1]


def test_hub_query_needs_a_higher_cosine():
    # The same cosine means less for a query that is close to everything.
    langs = {1: "zh"}
    plain_q = fuse_legs([], dense((1, 0.85)), 3, "zh", langs, background=bg(0.74, 0.70))
    hub_q = fuse_legs([], dense((1, 0.85)), 3, "zh", langs, background=bg(0.80, 0.72))
    assert ids(apply_floor(plain_q)) == [1] and ids(apply_floor(hub_q)) == []


def test_cross_language_gap_is_taken_from_the_background():
    # A Chinese query: 0.80 to an English fact is well above its English background
    # (0.72) and clears the floor; 0.80 to a Chinese fact is at its Chinese background
    # level (0.81) and does not.
    cross = fuse_legs([], dense((1, 0.80)), 4, "zh", {1: "en"}, background=ZH_Q)
    within = fuse_legs([], dense((1, 0.80)), 4, "zh", {1: "zh"}, background=ZH_Q)
    assert ids(apply_floor(cross)) == [1] and ids(apply_floor(within)) == []


def test_tagged_facts_are_centred_on_the_tagged_background():
    # The same cosine to the same English fact: compared with plain English text (0.72)
    # it stands out, compared with tagged text (0.79, what a tagged fact is embedded like)
    # it is not much above unrelated facts.
    q = bg(0.81, 0.72, 0.80, 0.79)
    plain = score_legs([], dense((1, 0.80)), 3, "zh", {1: "en"}, background=q)
    tagged = score_legs([], dense((1, 0.80)), 3, "zh", {1: "en"}, background=q,
                        doc_tagged={1: True})
    assert tagged[0][1] < plain[0][1]
    expected = 0.80 - 0.79 + DEFAULT.offset_tagged
    assert tagged[0][1] == pytest.approx(expected)


def test_offsets_by_pair_for_plain_facts():
    q = bg(0.80, 0.80)
    def conf(query_lang: str, doc_lang: str) -> float:
        return score_legs([], dense((1, 0.90)), 3, query_lang, {1: doc_lang}, background=q)[0][1]
    assert conf("zh", "zh") == pytest.approx(0.10)
    assert conf("zh", "en") == pytest.approx(0.10 + DEFAULT.offset_zh_en)
    assert conf("en", "zh") == pytest.approx(0.10 + DEFAULT.offset_en_zh)
    assert conf("en", "en") == pytest.approx(0.10 + DEFAULT.offset_en_en)
    assert conf("mixed", "en") == pytest.approx(0.10 + DEFAULT.offset_mixed)


def test_without_a_background_fixed_means_still_give_a_usable_order():
    langs = {1: "zh", 2: "zh", 3: "en"}
    fused = fuse_legs([], dense((1, 0.93), (2, 0.80), (3, 0.68)), 3, "zh", langs)
    assert ids(fused) == [1, 2, 3]
    assert ids(apply_floor(fused)) == [1]


# --- the lexical leg ----------------------------------------------------------------------


def test_cross_language_lexical_noise_does_not_overrule_dense():
    # en query, zh facts: BM25 matched one stray token ("NFL") in fact 9 with a big score.
    # RRF would put 9 first; fusion must keep the dense winner on top.
    legs_dense = dense((1, 0.82), (2, 0.79), (3, 0.78), (9, 0.76))
    legs_lex = lexical((9, 14.0, 1), (3, 6.0, 1))
    langs = dict.fromkeys((1, 2, 3, 9), "zh")
    fused = fuse_legs(legs_lex, legs_dense, query_terms=6, query_lang="en", doc_lang=langs,
                 background=EN_Q)
    assert ids(fused)[0] == 1
    assert ids(fused).index(9) > ids(fused).index(2)


def test_same_noise_weighs_less_across_languages_than_within_one():
    hit = LegHit(9, 14.0, 1)
    within = score_legs([hit], dense((1, 0.85), (9, 0.80)), 6, "zh", {1: "zh", 9: "zh"},
                        background=ZH_Q)
    across = score_legs([hit], dense((1, 0.85), (9, 0.80)), 6, "en", {1: "zh", 9: "zh"},
                        background=EN_Q)
    bonus_within = dict(within)[9] - dict(within)[1]
    bonus_across = dict(across)[9] - dict(across)[1]
    assert bonus_across < bonus_within


def test_strong_exact_lexical_match_with_weak_dense_score_still_ranks():
    # An identifier lookup: fact 5 matches every query term and is the BM25 winner, but the
    # embedder puts it fourth among near-ties.
    legs_dense = dense((1, 0.870), (2, 0.865), (3, 0.862), (5, 0.850))
    legs_lex = lexical((5, 21.0, 3), (2, 4.0, 1))
    langs = dict.fromkeys((1, 2, 3, 5), "en")
    fused = fuse_legs(legs_lex, legs_dense, query_terms=3, query_lang="en", doc_lang=langs,
                 background=EN_Q)
    assert ids(fused)[0] == 5


def test_lexical_only_fact_is_kept_but_not_above_dense_evidence():
    # Fact 7 is not in the dense top k: it gets the lowest dense cosine, plus its evidence.
    legs_dense = dense((1, 0.90), (2, 0.84))
    legs_lex = lexical((7, 12.0, 2))
    fused = fuse_legs(legs_lex, legs_dense, query_terms=2, query_lang="zh",
                 doc_lang={1: "zh", 2: "zh", 7: "zh"}, background=ZH_Q)
    assert set(ids(fused)) == {1, 2, 7}
    assert ids(fused)[0] == 1


def test_missing_query_terms_gives_lexical_no_weight():
    # query_terms=0 (all stopwords): a lexical hit adds nothing, dense order stands.
    fused = fuse_legs(lexical((2, 30.0, 1)), dense((1, 0.9), (2, 0.88)), 0, "zh",
                 {1: "zh", 2: "zh"}, background=ZH_Q)
    assert ids(fused) == [1, 2]


def test_empty_legs():
    assert fuse_legs([], [], query_terms=0, query_lang="zh") == []
    only_dense = fuse_legs([], dense((1, 0.9), (2, 0.8)), query_terms=0, query_lang="zh",
                      doc_lang={1: "zh", 2: "zh"}, background=ZH_Q)
    assert ids(only_dense) == [1, 2]
    only_lex = fuse_legs(lexical((4, 9.0, 3), (5, 2.0, 1)), [], query_terms=3, query_lang="en",
                    doc_lang={4: "en", 5: "en"})
    assert ids(only_lex) == [4, 5]


def test_without_dense_only_a_near_complete_lexical_match_clears_the_floor():
    only_lex = fuse_legs(lexical((4, 9.0, 3), (5, 2.0, 1)), [], query_terms=3, query_lang="en",
                    doc_lang={4: "en", 5: "en"})
    # The recall service takes no companions without a dense leg (search.py): each lexical
    # hit must clear the gate itself.
    assert ids(apply_floor(only_lex, companions=False)) == [4]


# --- the floor ----------------------------------------------------------------------------


def test_floor_drops_weak_results_and_keeps_strong_ones():
    langs = dict.fromkeys(range(1, 6), "zh")
    # Answerable-looking: a cosine well above what unrelated Chinese text reaches.
    strong = fuse_legs(lexical((1, 20.0, 4)), dense((1, 0.93), (2, 0.84), (3, 0.83)),
                  query_terms=4, query_lang="zh", doc_lang=langs, background=ZH_Q)
    assert ids(apply_floor(strong)) == [1]
    # Unanswerable-looking: the top is barely above the query's background.
    weak = fuse_legs(lexical((4, 3.0, 1)), dense((4, 0.845), (5, 0.843), (3, 0.84)),
                query_terms=5, query_lang="zh", doc_lang=langs, background=ZH_Q)
    assert apply_floor(weak) == Gated([], below=len(weak))
    assert all(rel < GATE for _, rel in weak)


def test_relevance_is_a_probability_like_scale_centred_on_the_floor():
    assert relevance(DEFAULT.center) == 0.5
    assert 0.0 <= relevance(-1.0) < relevance(0.05) < relevance(0.12) <= 1.0
    stricter = dataclasses.replace(DEFAULT, floor=0.9)
    fused = [(1, 0.95), (2, 0.6), (3, 0.4)]
    assert ids(apply_floor(fused, companions=False)) == [1, 2]
    assert ids(apply_floor(fused, stricter, companions=False)) == [1]
    assert ids(apply_floor([(2, 0.6), (3, 0.4)], stricter)) == []  # the gate moved up too


def test_the_gate_decides_for_the_query_and_companions_follow_it():
    low = companion_floor()
    gate = GATE
    assert relevance(DEFAULT.center - DEFAULT.companion_drop) == pytest.approx(low)
    assert 0.0 < low < gate
    between = (low + gate) / 2
    # The best hit clears the gate: hits down to the companion floor come with it.
    assert ids(apply_floor([(1, 0.97), (2, between), (3, low / 2)])) == [1, 2]
    # Injected unasked: every hit must clear the gate itself.
    assert ids(apply_floor([(1, 0.97), (2, between)], companions=False)) == [1]
    # No hit clears the gate: nothing, however many sit just under it.
    assert ids(apply_floor([(1, gate - 1e-9), (2, between), (3, between)])) == []
    assert apply_floor([]) == Gated([], 0)


def test_companions_are_flagged_and_the_refused_are_counted():
    low, gate = companion_floor(), GATE
    between = (low + gate) / 2
    gated = apply_floor([(1, 0.97), (2, 0.9), (3, between), (4, low / 2), (5, low / 3)])
    assert gated.passed == [Passed(1, 0.97, False), Passed(2, 0.9, False),
                            Passed(3, between, True)]
    assert gated.below == 2
    # A refused query counts every candidate, the ones between the two floors included.
    assert apply_floor([(1, between), (2, low / 2)]).below == 2


def test_the_gate_opens_on_the_best_eligible_hit():
    """What the recall service may not return (deleted, another category, a supersede chain
    that ends nowhere) neither passes nor opens the gate, and is not counted as refused."""
    low, gate = companion_floor(), GATE
    between = (low + gate) / 2
    fused = [(1, 0.99), (2, between), (3, low / 2)]
    # Fact 1 is not eligible: fact 2 is the best eligible hit, and it is under the gate.
    assert apply_floor(fused, eligible={2, 3}) == Gated([], below=2)
    # Ineligible hits above the gate are skipped until an eligible one clears it.
    fused = [(1, 0.99), (2, 0.98), (3, between), (4, low / 2)]
    gated = apply_floor(fused, eligible={2, 3, 4})
    assert gated == Gated([Passed(2, 0.98, False), Passed(3, between, True)], below=1)
    # An ineligible companion is dropped without being counted.
    assert apply_floor(fused, eligible={1, 4}) == Gated([Passed(1, 0.99, False)], below=1)


def test_without_a_dense_leg_or_without_the_floor():
    low, gate = companion_floor(), GATE
    between = (low + gate) / 2
    fused = [(1, 0.97), (2, between), (3, low / 2)]
    # Lexical leg alone: companions were calibrated on fused scores, every hit must clear the
    # gate itself (as with companions=False).
    assert apply_floor(fused, lexical_only=True) == Gated([Passed(1, 0.97, False)], below=2)
    assert apply_floor(fused, lexical_only=True) == apply_floor(fused, companions=False)
    # No floor at all: every eligible hit passes, none is a companion, nothing is refused.
    assert apply_floor(fused, use_floor=False, eligible={1, 3}) == Gated(
        [Passed(1, 0.97, False), Passed(3, low / 2, False)], below=0)


def test_ordering_is_deterministic_and_ties_break_by_id():
    legs_dense = dense((8, 0.9), (3, 0.9), (5, 0.9))
    langs = dict.fromkeys((3, 5, 8), "en")
    first = fuse_legs([], legs_dense, 2, "en", langs, background=EN_Q)
    again = fuse_legs([], list(reversed(legs_dense)), 2, "en", langs, background=EN_Q)
    assert ids(first) == [3, 5, 8] == ids(again)
    assert first == again


def test_scores_are_sorted_best_first():
    fused = fuse_legs(lexical((3, 9.0, 2), (1, 4.0, 1)), dense((1, 0.9), (2, 0.86), (3, 0.85)),
                 3, "zh", {1: "zh", 2: "en", 3: "mixed"}, background=ZH_Q,
                 doc_tagged={2: True})
    rels = [rel for _, rel in fused]
    assert rels == sorted(rels, reverse=True)


def test_language_pairs():
    assert language_pair("zh", "zh") == "same"
    assert language_pair("en", "en") == "same"
    assert language_pair("zh", "en") == "zh>en"
    assert language_pair("en", "zh") == "en>zh"
    assert language_pair("zh", "mixed") == "mixed"
    assert language_pair("mixed", "en") == "mixed"
    assert language_pair("zh", None) == "mixed"


# --- several vectors per fact (writer questions) and the language cohorts ---------------------


def test_a_fact_scores_by_its_best_vector_each_centred_on_its_own_language():
    bg = Background({("zh", False): 0.80, ("en", False): 0.72,
                     ("zh", True): 0.80, ("en", True): 0.72})
    # Fact 1 is English; its Chinese question is the vector a Chinese query matches best.
    hits = [
        LegHit(1, 0.78, lang="en"),
        LegHit(1, 0.92, lang="zh", form="question"),
        LegHit(2, 0.86, lang="zh"),
    ]
    scored = dict(score_legs([], hits, 3, "zh", {1: "en", 2: "zh"}, background=bg))
    # the question (0.92 - 0.80, less the question offset) beats the fact's own vector
    # (0.78 - 0.72 + zh>en offset)
    assert scored[1] == pytest.approx(0.92 - 0.80 + DEFAULT.offset_question)
    assert scored[1] > scored[2]


def test_a_question_vector_is_centred_on_the_plain_background_even_for_tagged_facts():
    bg = Background({("zh", False): 0.80, ("en", False): 0.72,
                     ("zh", True): 0.85, ("en", True): 0.76})
    hits = [LegHit(1, 0.90, lang="en", form="question")]
    scored = dict(score_legs([], hits, 3, "en", {1: "en"}, background=bg, doc_tagged={1: True}))
    assert scored[1] == pytest.approx(0.90 - 0.72 + DEFAULT.offset_en_en + DEFAULT.offset_question)


def test_cohort_means_are_per_language_group_over_the_nearest_vectors():
    params = dataclasses.replace(DEFAULT, bank_cohort=2)
    hits = [LegHit(1, 0.9, lang="zh"), LegHit(2, 0.8, lang="zh"), LegHit(3, 0.1, lang="zh"),
            LegHit(4, 0.7, lang="en"), LegHit(5, 0.5, lang="mixed")]
    from factbank.read.fusion import cohort_means

    assert cohort_means(hits, params=params) == {
        True: pytest.approx(0.85), False: pytest.approx(0.6)
    }


def test_the_cohort_keeps_same_language_answers_above_the_other_languages_neighbours():
    """An English question in a bank whose zh facts share its subject: the background alone
    lifts every zh fact by the whole language gap; the cohort (the bank's own zh level for
    this query) takes most of that lift back, and the gate's confidence is unchanged."""
    bg = Background({("zh", False): 0.74, ("en", False): 0.80,
                     ("zh", True): 0.74, ("en", True): 0.80})
    zh_neighbours = [LegHit(10 + i, 0.83 - 0.002 * i, lang="zh") for i in range(20)]
    answer = LegHit(1, 0.89, lang="en")
    en_rest = [LegHit(30 + i, 0.80 - 0.002 * i, lang="en") for i in range(20)]
    hits = [answer, *zh_neighbours, *en_rest]
    langs = {h.fact_id: h.lang for h in hits}
    from factbank.read.fusion import cohort_means

    plain = score_legs([], hits, 4, "en", langs, background=bg)
    ranked = score_legs([], hits, 4, "en", langs, background=bg, cohort=cohort_means(hits))
    assert plain[0][0] != 1  # background only: a zh neighbour outranks the answer
    assert ranked[0][0] == 1
    # the gate's scale is the plain confidence: the cohort never moves it
    assert dict(plain)[1] == pytest.approx(0.89 - 0.80 + DEFAULT.offset_en_en)


def _decisive_case(top_bm25: float) -> tuple[list[LegHit], list[LegHit], dict[int, str]]:
    """A Chinese bank: 12 dense neighbours near 0.88-0.86, fact 99 (every query term) at
    cosine 0.845, far down; BM25 puts 99 first with `top_bm25`, then a flat pack near 10."""
    hits = [LegHit(i, 0.880 - 0.002 * i, lang="zh") for i in range(12)]
    hits.append(LegHit(99, 0.845, lang="zh"))
    lex = [LegHit(99, top_bm25, 9)] + [LegHit(i, 10.3 - 0.3 * i, 4) for i in range(9)]
    return lex, hits, {h.fact_id: "zh" for h in hits}


def test_a_bm25_top_hit_standing_apart_ranks_in_the_top_five():
    """BM25's top hit far ahead of its own next hits (32 against a pack near 10, as the
    cmrc2018 sentence every term of `2012年5月获得教育局同意增设什么？` finds) is worth more
    than the ~0.04 cosine units of ordinary lexical evidence in the ranking; the gate's
    confidence does not move."""
    from factbank.read.fusion import cohort_means, decisive_lexical

    lex, hits, langs = _decisive_case(32.0)
    assert decisive_lexical(lex) == 99
    ranked = score_legs(lex, hits, 9, "zh", langs, background=ZH_Q, cohort=cohort_means(hits))
    assert ids(ranked).index(99) < 5
    off = dataclasses.replace(DEFAULT, apart_weight=0.0)
    without = raw_scores(Candidates(lex, hits, 9, "zh", langs, background=ZH_Q), off,
                         cohort=cohort_means(hits))
    assert ids(without).index(99) >= 5
    # the gate's scale (no cohort) is the same with and without the rule
    assert score_legs(lex, hits, 9, "zh", langs, background=ZH_Q) == raw_scores(
        Candidates(lex, hits, 9, "zh", langs, background=ZH_Q), off)


def test_a_bm25_top_hit_inside_the_pack_or_across_languages_earns_nothing_more():
    from factbank.read.fusion import cohort_means, decisive_lexical

    lex, hits, langs = _decisive_case(11.0)  # first, but not apart from 10.3, 10.0, ...
    assert decisive_lexical(lex) is None
    assert decisive_lexical(lex[:2]) is None  # two hits: no distribution to stand out of
    lex, hits, langs = _decisive_case(32.0)
    en = {f: "en" for f in langs}  # a Chinese query on English facts: BM25 there is noise
    assert decisive_lexical(lex) == 99
    off = dataclasses.replace(DEFAULT, apart_weight=0.0)
    cohort = cohort_means(hits, en)
    assert score_legs(lex, hits, 9, "zh", en, background=ZH_Q, cohort=cohort) == raw_scores(
        Candidates(lex, hits, 9, "zh", en, background=ZH_Q), off, cohort=cohort)


# --- where the embedder places a vector's language ---------------------------------


def _two_language_background() -> BackgroundVectors:
    """Background rows on a 3-d sphere: Chinese around +y, English around +x, so the language
    axis is x - y and the anchors sit at the two groups' inner tails."""
    entries = [BackgroundEntry("zh", f"z{i}", ()) for i in range(3)] + [
        BackgroundEntry("en", f"e{i}", ()) for i in range(3)]
    zh = [[0.1 * i, 1.0, 0.2] for i in range(3)]
    en = [[1.0, 0.1 * i, 0.2] for i in range(3)]
    rows = np.array(zh + en + zh + en, dtype=np.float32)
    return BackgroundVectors.from_vectors(rows, entries)


def test_en_share_is_zero_for_chinese_one_for_english_and_between_for_neither():
    vectors = _two_language_background()
    shares = vectors.en_shares(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.7]]))
    assert shares[0] == 0.0 and shares[1] == 1.0
    assert 0.0 < shares[2] < 1.0
    # the SQL path (cosine to the axis) gives the same share as the in-memory one
    v = np.array([0.5, 0.5, 0.7], dtype=np.float32)
    assert vectors.en_share(float(v @ vectors.axis / np.linalg.norm(v))) == pytest.approx(
        float(shares[2]), abs=1e-6)


def test_background_without_two_separate_languages_has_no_axis():
    entries = [BackgroundEntry("zh", "z", ()), BackgroundEntry("en", "e", ())]
    same = np.ones((4, 3), dtype=np.float32)
    assert not BackgroundVectors.from_vectors(same, entries).has_axis


# Lines that are "en" or "mixed" by their letters but not English to the embedder, in a bank of
# Chinese sentences (mlqa-r-zh-dev: each came first for Chinese questions).
NOT_ENGLISH_TO_THE_EMBEDDER = [
    ("ISBN 978-0-520-08670-8.", "en", 0.25),
    ("Majulah Singapura）。", "en", 0.37),
    ("──。", "mixed", 0.19),
    ("kubectl rollout restart deploy/api", "en", 0.3),
    ("0x7f3a9c", "mixed", 0.0),
]


@pytest.mark.parametrize(("text", "label", "share"), NOT_ENGLISH_TO_THE_EMBEDDER)
def test_a_mostly_non_chinese_line_is_never_lifted_over_a_better_chinese_answer(
        text, label, share):
    """A Chinese question in a Chinese bank: the answer's raw cosine is 0.89, the stray line's
    0.82 (as measured). Centred by its label, the line took the whole zh>en gap and came
    first; placed by the embedder, it is centred mostly as Chinese text and stays below."""
    answer = LegHit(1, 0.89, lang="zh", en_share=0.0)
    near = [LegHit(10 + i, 0.86 - 0.002 * i, lang="zh", en_share=0.0) for i in range(50)]
    rest = [LegHit(2, 0.82, lang=label, en_share=share)] + [
        LegHit(3 + i, 0.78 - 0.01 * i, lang=label, en_share=share) for i in range(5)]
    hits = [answer, *near, *rest]
    langs = {h.fact_id: h.lang for h in hits}
    from factbank.read.fusion import cohort_means

    ranked = ids(score_legs([], hits, 4, "zh", langs, background=ZH_Q,
                            cohort=cohort_means(hits, langs)))
    assert ranked[0] == 1, text
    # and the line ranks where plain cosine puts it, not above Chinese text it trails
    assert ranked.index(2) > ranked.index(10)
    # labelled only (no share), the same line outranked the answer: the bug this guards
    unplaced = [dataclasses.replace(h, en_share=None) for h in hits]
    before = ids(score_legs([], unplaced, 4, "zh", langs, background=ZH_Q,
                            cohort=cohort_means(unplaced, langs)))
    if label == "en":
        assert before[0] == 2


def test_a_real_english_answer_still_takes_the_whole_language_gap():
    """The cross-language answer the centring exists for keeps its lift: an English sentence
    (share 1) at 0.80 against Chinese non-answers at 0.84 for a Chinese question."""
    answer = LegHit(1, 0.80, lang="en", en_share=1.0)
    zh = [LegHit(10 + i, 0.84 - 0.002 * i, lang="zh", en_share=0.0) for i in range(20)]
    en = [LegHit(30 + i, 0.70 - 0.002 * i, lang="en", en_share=1.0) for i in range(20)]
    hits = [answer, *zh, *en]
    langs = {h.fact_id: h.lang for h in hits}
    from factbank.read.fusion import cohort_means

    assert ids(score_legs([], hits, 4, "zh", langs, background=ZH_Q,
                          cohort=cohort_means(hits, langs)))[0] == 1


def test_a_stray_line_no_longer_opens_the_gate_for_a_question_the_bank_cannot_answer():
    """On the gate's scale too (no cohort), a stray line is centred mostly as Chinese: its
    confidence falls below the gate, where its label's whole lift put it above."""
    line = [LegHit(1, 0.84, lang="en", en_share=0.25)]
    placed = dict(score_legs([], line, 4, "zh", {1: "en"}, background=ZH_Q))[1]
    unplaced = dict(score_legs([], [dataclasses.replace(line[0], en_share=None)], 4, "zh",
                               {1: "en"}, background=ZH_Q))[1]
    assert relevance(unplaced) >= GATE > relevance(placed)


def test_the_decisive_lift_orders_but_never_opens_a_gap_under_the_best_hit():
    """A prompt block keeps the hits within 0.015 of its best (inject.PROMPT_MARGIN): the
    +0.02 lift on a hit that is first anyway, or that it makes first, must not push the next
    hits out of it. The lifted hit ends level with the best other one (a tie-break above it),
    and the order is the order the uncapped lift gives."""
    from factbank.read.fusion import LIFT_TIE, cohort_means

    lex, hits, langs = _decisive_case(32.0)
    # at 0.853 fact 99 stands third without the lift, 0.0023 under the best; +0.02 would put
    # it 0.018 above the best, out of a prompt block's reach for everything under it
    hits = [h if h.fact_id != 99 else LegHit(99, 0.853, lang="zh") for h in hits]
    cohort = cohort_means(hits)
    ranked = score_legs(lex, hits, 9, "zh", langs, background=ZH_Q, cohort=cohort)
    off = dataclasses.replace(DEFAULT, apart_weight=0.0)
    without = dict(raw_scores(Candidates(lex, hits, 9, "zh", langs, background=ZH_Q), off,
                              cohort=cohort))
    assert sorted(without, key=lambda f: -without[f]).index(99) == 2
    assert ranked[0][0] == 99
    assert ranked[0][1] == pytest.approx(ranked[1][1] + LIFT_TIE)
    assert ranked[1][1] >= ranked[0][1] - 0.015  # the best other hit stays in a block
    # the uncapped order: the lift as a plain addition
    uncapped = sorted(((f, c + (DEFAULT.apart_weight if f == 99 else 0.0))
                       for f, c in without.items()), key=lambda x: (-x[1], x[0]))
    assert ids(ranked) == [f for f, _ in uncapped]


# --- the hub figure (ranking only) ---------------------------------------------------------


def test_hub_figure_is_the_cosine_to_the_centroid_less_its_languages_level():
    vectors = _two_language_background()
    assert np.linalg.norm(vectors.centroid) == pytest.approx(1.0)
    zh_level, en_level = vectors.hub_levels
    # each language's own lines sit at its level, on average: their figures average 0
    rows = vectors.matrix[:6]
    shares = vectors.en_shares(rows)
    figures = vectors.hubs(rows, shares)
    assert figures[:3].mean() == pytest.approx(0.0, abs=1e-6)
    assert figures[3:].mean() == pytest.approx(0.0, abs=1e-6)
    # the SQL path (cosine to the centroid) gives the in-memory figure
    v = np.array([0.5, 0.5, 0.7], dtype=np.float32)
    share = float(vectors.en_shares(v[None, :])[0])
    cos = float(v @ vectors.centroid / np.linalg.norm(v))
    assert vectors.hub(cos, share) == pytest.approx(float(vectors.hubs(v[None, :], [share])[0]))
    assert vectors.hub(cos, 0.0) == pytest.approx(cos - zh_level)
    assert vectors.hub(cos, 1.0) == pytest.approx(cos - en_level)
    # an embedder that gives no centroid gives no figure
    assert BackgroundVectors(vectors.matrix, vectors.groups).hub(0.9, 1.0) == 0.0


def test_a_generic_line_near_everything_ranks_under_an_answer_it_barely_beats():
    """A fact's own vector ranks by its cosine less hub_weight x its hub figure: boilerplate
    near everything generic (hub +0.08) loses first place to an answer 0.01 under it. The
    gate's confidence is the plain one, and writer questions and tagged facts keep theirs."""
    from factbank.read.fusion import cohort_means

    generic = LegHit(1, 0.86, lang="en", hub=0.08)
    answer = LegHit(2, 0.85, lang="en", hub=0.0)
    rest = [LegHit(10 + i, 0.75 - 0.002 * i, lang="en") for i in range(10)]
    hits = [generic, answer, *rest]
    langs = {h.fact_id: "en" for h in hits}
    plain = score_legs([], hits, 4, "en", langs, background=EN_Q)
    ranked = score_legs([], hits, 4, "en", langs, background=EN_Q,
                        cohort=cohort_means(hits, langs))
    assert ids(plain)[:2] == [1, 2]  # the gate's scale: untouched
    assert ids(ranked)[:2] == [2, 1]
    assert dict(ranked)[2] - dict(ranked)[1] == pytest.approx(
        0.25 * 0.08 - 0.01, abs=1e-6) and DEFAULT.hub_weight == 0.25
    # the same vector as a writer question, or a fact saved with tags: as it was
    as_question = [dataclasses.replace(generic, form="question"), answer, *rest]
    ranked = score_legs([], as_question, 4, "en", langs, background=EN_Q,
                        cohort=cohort_means(as_question, langs))
    assert ids(ranked)[:2] == [1, 2]
    tagged = {1: True, 2: True}  # both centred alike: only the figure could reorder them
    ranked = score_legs([], hits, 4, "en", langs, tagged, background=EN_Q,
                        cohort=cohort_means(hits, langs, doc_tagged=tagged))
    assert ids(ranked)[:2] == [1, 2]
