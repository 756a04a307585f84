"""fuse() on constructed legs: what each rule is for, one rule per test.

Scores are made up but in the ranges measured on the dev sets (e5-small cosines 0.75-0.95,
BM25 a few to a few dozen), so a test breaks when a rule stops doing its job, not when a
constant moves by a hair.
"""

from __future__ import annotations

import dataclasses

from factbank.fusion import (
    DEFAULT,
    LegHit,
    apply_floor,
    floor_for,
    fuse,
    language_pair,
    raw_scores,
    relevance,
)


def dense(*pairs: tuple[int, float]) -> list[LegHit]:
    return [LegHit(fid, score) for fid, score in pairs]


def lexical(*triples: tuple[int, float, int]) -> list[LegHit]:
    return [LegHit(fid, score, matched) for fid, score, matched in triples]


def ids(fused: list[tuple[int, float]]) -> list[int]:
    return [fid for fid, _ in fused]


def test_cross_language_lexical_noise_does_not_overrule_dense():
    # en query, zh facts: BM25 matched one stray token ("NFL") in fact 9 with a big score.
    # RRF would put 9 first; fusion must keep the dense winner on top.
    legs_dense = dense((1, 0.82), (2, 0.79), (3, 0.78), (9, 0.76))
    legs_lex = lexical((9, 14.0, 1), (3, 6.0, 1))
    langs = dict.fromkeys((1, 2, 3, 9), "zh")
    fused = fuse(legs_lex, legs_dense, query_terms=6, query_lang="en", doc_lang=langs)
    assert ids(fused)[0] == 1
    assert ids(fused).index(9) > ids(fused).index(2)


def test_same_noise_weighs_less_across_languages_than_within_one():
    hit = LegHit(9, 14.0, 1)
    within = raw_scores([hit], dense((1, 0.85), (9, 0.80)), 6, "zh", {1: "zh", 9: "zh"})
    across = raw_scores([hit], dense((1, 0.85), (9, 0.80)), 6, "en", {1: "zh", 9: "zh"})
    bonus_within = dict(within)[9] - dict(within)[1]
    bonus_across = dict(across)[9] - dict(across)[1]
    assert bonus_across < bonus_within


def test_strong_exact_lexical_match_with_weak_dense_score_still_ranks():
    # An identifier lookup: fact 5 matches every query term and is the BM25 winner, but the
    # embedder puts it fourth among near-ties.
    legs_dense = dense((1, 0.870), (2, 0.865), (3, 0.862), (5, 0.850))
    legs_lex = lexical((5, 21.0, 3), (2, 4.0, 1))
    langs = dict.fromkeys((1, 2, 3, 5), "en")
    fused = fuse(legs_lex, legs_dense, query_terms=3, query_lang="en", doc_lang=langs)
    assert ids(fused)[0] == 5


def test_lexical_only_fact_is_kept_but_not_above_dense_evidence():
    # Fact 7 is not in the dense top k: it gets the lowest dense cosine, plus its evidence.
    legs_dense = dense((1, 0.90), (2, 0.84))
    legs_lex = lexical((7, 12.0, 2))
    fused = fuse(legs_lex, legs_dense, query_terms=2, query_lang="zh",
                 doc_lang={1: "zh", 2: "zh", 7: "zh"})
    assert set(ids(fused)) == {1, 2, 7}
    assert ids(fused)[0] == 1


def test_empty_legs():
    assert fuse([], [], query_terms=0, query_lang="zh") == []
    only_dense = fuse([], dense((1, 0.9), (2, 0.8)), query_terms=0, query_lang="zh",
                      doc_lang={1: "zh", 2: "zh"})
    assert ids(only_dense) == [1, 2]
    only_lex = fuse(lexical((4, 9.0, 3), (5, 2.0, 1)), [], query_terms=3, query_lang="en",
                    doc_lang={4: "en", 5: "en"})
    assert ids(only_lex) == [4, 5]


def test_without_dense_only_a_near_complete_lexical_match_clears_the_floor():
    only_lex = fuse(lexical((4, 9.0, 3), (5, 2.0, 1)), [], query_terms=3, query_lang="en",
                    doc_lang={4: "en", 5: "en"})
    assert ids(apply_floor(only_lex)) == [4]


def test_floor_drops_weak_results_and_keeps_strong_ones():
    langs = dict.fromkeys(range(1, 6), "zh")
    # Answerable-looking: a clear winner at a high cosine.
    strong = fuse(lexical((1, 20.0, 4)), dense((1, 0.93), (2, 0.88), (3, 0.87)),
                  query_terms=4, query_lang="zh", doc_lang=langs)
    kept = apply_floor(strong)
    assert ids(kept)[0] == 1
    # Unanswerable-looking: a flat top at the cosine unrelated zh text reaches.
    weak = fuse(lexical((4, 3.0, 1)), dense((4, 0.855), (5, 0.853), (3, 0.85)),
                query_terms=5, query_lang="zh", doc_lang=langs)
    assert apply_floor(weak) == []
    assert all(rel < floor_for("zh") for _, rel in weak)


def test_cross_language_scores_are_on_the_same_scale():
    # A zh->en cosine of 0.84 is as strong as a zh->zh cosine well above 0.9: it must clear
    # the floor, while the same 0.84 within one language must not.
    cross = fuse([], dense((1, 0.84), (2, 0.80)), 4, "zh", {1: "en", 2: "en"})
    within = fuse([], dense((1, 0.84), (2, 0.80)), 4, "zh", {1: "zh", 2: "zh"})
    assert apply_floor(cross) and not apply_floor(within)


def test_relevance_is_a_probability_like_scale_centred_on_the_floor():
    assert relevance(DEFAULT.center) == 0.5
    assert 0.0 <= relevance(0.0) < relevance(0.88) < relevance(0.95) <= 1.0
    stricter = dataclasses.replace(DEFAULT, floor=0.9)
    fused = [(1, 0.95), (2, 0.6)]
    assert ids(apply_floor(fused)) == [1, 2]
    assert ids(apply_floor(fused, stricter)) == [1]


def test_ordering_is_deterministic_and_ties_break_by_id():
    legs_dense = dense((8, 0.9), (3, 0.9), (5, 0.9))
    first = fuse([], legs_dense, 2, "en", dict.fromkeys((3, 5, 8), "en"))
    again = fuse([], list(reversed(legs_dense)), 2, "en", dict.fromkeys((3, 5, 8), "en"))
    assert ids(first) == [3, 5, 8] == ids(again)
    assert first == again


def test_scores_are_sorted_best_first():
    fused = fuse(lexical((3, 9.0, 2), (1, 4.0, 1)), dense((1, 0.9), (2, 0.86), (3, 0.85)),
                 3, "zh", dict.fromkeys((1, 2, 3), "zh"))
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


def test_missing_query_terms_gives_lexical_no_weight():
    # query_terms=0 (all stopwords): a lexical hit adds nothing, dense order stands.
    fused = fuse(lexical((2, 30.0, 1)), dense((1, 0.9), (2, 0.88)), 0, "zh",
                 {1: "zh", 2: "zh"})
    assert ids(fused) == [1, 2]


def test_lone_other_language_fact_gets_a_smaller_offset():
    # One English line among Chinese facts (a short hub) vs. the same cosine in a bank where
    # English facts are common: the lone one must score lower.
    zh_bank = {1: "zh", 2: "zh", 3: "zh", 9: "en"}
    lone = dict(raw_scores([], dense((9, 0.83), (1, 0.82), (2, 0.81), (3, 0.80)), 3, "zh",
                           zh_bank))
    en_bank = dict.fromkeys((1, 2, 3, 9), "en")
    crowd = dict(raw_scores([], dense((9, 0.83), (1, 0.82), (2, 0.81), (3, 0.80)), 3, "zh",
                            en_bank))
    assert lone[9] < crowd[9]
