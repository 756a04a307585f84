"""Hybrid recall fusion: one ranked list, one score scale, one gate.

Why not reciprocal rank fusion: RRF trusts every leg's rank equally, so when a leg has nothing
it still promotes its confident noise (across languages BM25 matches only a stray number or
name), and ranks carry no notion of "how good", so RRF gives no score a floor could apply to
(docs/principles.md#nothing-rather-than-noise). Measured:
evals/reports/fusion-notes.md#why-not-reciprocal-rank-fusion.

The method: a confidence in cosine units, one squash, one gate. Every measurement behind it is
in evals/reports/fusion-notes.md (linked below by section); this module keeps the method and
the reason for each constant (`FusionParams`).

1. Base: the dense cosine cos(q, f). A fact that only the lexical leg returned gets the lowest
   cosine the dense leg returned (its true cosine is at most that).
2. Lexical evidence on top, weighted by the leg's own evidence, never by its rank: in one
   language (or either side mixed) 0.04 x (0.5 coverage + 0.5 BM25 / best BM25 of the query);
   across languages 0.02 x coverage (BM25 magnitude there is confident noise). Coverage is
   distinct query terms matched / distinct query terms. In the ranking only, BM25's top hit
   in the query's language earns 0.02 more when it stands far apart from BM25's own next
   hits (`decisive_lexical`, `FusionParams.apart_weight`, `apart_ratio`).
3. Background centring: minus mean_bg(q, lang(f), form(f)), the query's mean cosine to the
   shipped background corpus (`data/background.jsonl`: 257 generic sentences written for
   this project, everyday text, encyclopaedia-style lines, technical notes and questions
   about nothing in particular, in English and the same 257 in Chinese, each with a few
   bilingual tags drawn from its own words). The mean is taken over the background
   sentences in the fact's language (a mixed fact takes the higher of the two) and in the
   fact's form: a fact saved with tags is embedded as content + tags, so it is compared with
   the background embedded the same way. That mean is this query's level for unrelated text:
   it removes per-query hubness (a short generic question is close to everything) and most
   of the cross-language gap (zh>en cosines run ~0.09 lower), and it never looks at the
   other facts, so a fact's confidence does not change with the size of its bank.
   Alternatives measured and dropped (z-norm, nearest background lines, margins, fact-side
   centring, a sparse head, a fitted combination): fusion-notes.md#measured-and-dropped.
4. What centring leaves, as offsets (cosine units, `offset_*`): one per (query > fact)
   language pair for plain facts, zh>zh the reference, and one for facts with tags.
5. relevance = logistic((confidence - center) / scale): 0.5 at the gate.
6. The gate (`apply_floor`: the recall service and the evals run this one function). It
   decides for the whole query: if the best eligible hit is below relevance 0.5, nothing at
   all is returned. A search whose best hit clears it also returns the hits within
   `companion_drop` of the gate; with `companions=False` (what is injected unasked), and for
   any lexical-only result, every hit must clear the gate itself. Why: a fact-by-fact floor
   has to sit under the weakest golds a set may not lose, even those ranked 2-5 under a good
   first answer, and non-answers then pass it; a gate on the best hit can sit higher for the
   same R@5 and refuses far more (fusion-notes.md#gate-and-companions).
7. Several vectors per fact: its own and one per writer question
(docs/principles.md#the-writer-asks-the-questions). Each dense
   hit is centred on its own vector's language and form (a question on the plain
   background, less `offset_question` on the gate's scale) and a fact takes its best vector.
8. Two scores: the gate keeps the calibrated confidence above; the ranking blends the bank's
   own cohort per language group into each hit's level (`bank_share`, `cohort_means`),
   takes a share of each fact's hub figure off its own vector (`hub_weight`: how close it
   sits to generic text, from the background's centroid), and ranks by confidence, not
   relevance (relevance saturates at 1.0 a few hundredths above the gate). Why:
   fusion-notes.md#writer-questions-and-mixed-language-banks, and for the hub figure
   evals/reports/2026-12-06/hubs-2.md.
9. Which language a dense hit is ranked as is the embedder's, not its letters': its vector's
   `en_share` on the background's language axis (`LANGUAGE_TAIL_PERCENTILE`) mixes the
   Chinese and English levels of steps 3, 4 and 8, on the gate's scale (recalibrated
   offsets) and in the ranking score (`rank_offset_*`, the offsets it was measured with).
   An id, a command or a line of dashes is "en" by its letters and neither language to the
   embedder; centred as English it took the whole cross-language lift
   (evals/reports/2026-12-02/native-zh.md).

Calibration (`python -m factbank_evals.fusion_sweep --data /work/shared/evaldata`): the gate is
the highest confidence costing <= 2 points of R@5 on each zh>zh dev set, companions included;
each pair offset is the smallest that keeps that pair's sets within 2 points at that gate; the
tagged offset lets the agent-memory set lose at most 6 points as injected
(fusion-notes.md#calibration, #the-tagged-offset-why-6-points). What the gate achieves and
cannot achieve (refusals per pair, near-topic questions): fusion-notes.md#refusals,
#what-the-gate-cannot-refuse, #known-weak-spots.
"""

from __future__ import annotations

import json
import math
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import NamedTuple

import numpy as np

from factbank.text.lexicon import indexed_text

BACKGROUND_FILE = "background.jsonl"


@dataclass(frozen=True)
class LegHit:
    """One candidate from one leg.

    `score` is the leg's raw score: cosine for the dense leg, BM25 for the lexical leg.
    `matched_terms` is the number of distinct query terms the fact contains (lexical leg only;
    0 for dense hits).
    """

    fact_id: int
    score: float
    matched_terms: int = 0
    # Dense hits on one of a fact's vectors: the language of that vector's text and its form,
    # "fact" (the fact's own vector) or "question" (one of its writer questions, centred on
    # the plain background: a question carries no tags). None: the fact's own vector, in the
    # fact's language (`doc_lang`).
    lang: str | None = None
    form: str | None = None
    # Where the embedder places this vector between the two languages (0: with the Chinese
    # background, 1: with the English one; `BackgroundVectors.en_share`). None: its label
    # decides (`lang`, else the fact's `doc_lang`).
    en_share: float | None = None
    # How close the vector sits to generic text, beyond what is usual for its language
    # (`BackgroundVectors.hub`): the ranking takes `hub_weight` x this off a fact's own
    # vector. 0: not known.
    hub: float = 0.0


@dataclass(frozen=True)
class Candidates:
    """What fusion needs for one query: both legs' hits and what is known of the query and of
    each fact. `raw_scores` and `fuse` take this one object (the recall service builds it in
    its legs step, the evals from their own legs), so the two can never be fed differently.

    `query_terms` is the number of distinct query tokens (factbank.text.tokenizer.tokenize);
    `query_lang` and `doc_lang` are factbank.text.tokenizer.language labels ("zh", "en",
    "mixed") of the query and of each fact's content; a fact missing from `doc_lang` is
    treated as mixed. `doc_tagged` says which facts were saved with tags (they are embedded
    with them, so they are compared with the tagged background). `background` is
    `Background.for_query(query vector, background vectors)`; without one, fixed typical
    means are used (`fallback_mean_*`): it still works, but cannot remove the query's own
    hubness.
    """

    lexical: Sequence[LegHit]
    dense: Sequence[LegHit]
    query_terms: int
    query_lang: str
    doc_lang: Mapping[int, str] = field(default_factory=dict)
    doc_tagged: Mapping[int, bool] = field(default_factory=dict)
    background: Background | None = None


# --- the background ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BackgroundEntry:
    """One background sentence: its language ("zh" or "en"), text and bilingual tags."""

    lang: str
    text: str
    tags: tuple[str, ...]


@cache
def load_background() -> tuple[BackgroundEntry, ...]:
    """The shipped background corpus (`factbank/data/background.jsonl`), read once."""
    raw = resources.files("factbank").joinpath("data", BACKGROUND_FILE).read_text("utf-8")
    out = []
    for line in raw.splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(BackgroundEntry(row["lang"], row["text"], tuple(row.get("tags") or ())))
    return tuple(out)


def background_texts(entries: Sequence[BackgroundEntry] | None = None) -> list[str]:
    """The passages to embed, in `BackgroundVectors` order: every sentence plain, then every
    sentence with its tags, exactly as a fact saved with tags is embedded
    (`lexicon.indexed_text`: a different form would put the tagged mean off). Embed them with
    the bank's own embedder (`embedder.embed_passages`, so they are cached like facts)."""
    entries = load_background() if entries is None else entries
    return [e.text for e in entries] + [indexed_text(e.text, e.tags) for e in entries]


# Where a vector's language sits, from the embedder's own view: its projection on the axis
# from the Chinese background's centroid to the English one, read as a share of the way from
# the Chinese background's upper tail to the English background's lower tail (these
# percentiles), clipped to [0, 1]. Why the embedder's view and not the text's label: the
# language centring lifts a fact by the cross-language gap e5 puts between a query and text
# of the other language, and text that is "English" by its letters but not by its words (an
# ISBN, a motto in Malay, a line of box-drawing dashes, a command) sits between the two
# (mlqa-r-zh-dev: ISBN 0.25, `──。` 0.19; Chinese sentences with Latin names 0; English
# sentences 0.8-1). Labelled "en", such lines took the whole gap and came first for one
# native-Chinese question in 13: dense R@5 0.751 against plain cosine 0.819; with the share,
# 0.815 (evals/reports/2026-12-02/native-zh.md). The tails, not the medians: at the medians
# real English sentences got only 0.75 of the gap (mlqa dense 0.799).
LANGUAGE_TAIL_PERCENTILE = 5.0


@dataclass(frozen=True)
class BackgroundVectors:
    """The embedded background of one embedder: unit rows, grouped by (language, tagged),
    and the language axis (`en_share`).

    Build once per embedder (`from_vectors(embed(background_texts()))`) and keep it; a query
    then costs one (2n x dim) @ (dim,) product in `Background.for_query`.
    """

    matrix: np.ndarray
    groups: Mapping[tuple[str, bool], np.ndarray]
    # Unit vector from the plain Chinese background's centroid to the plain English one, and
    # the projections on it where Chinese ends and English begins (LANGUAGE_TAIL_PERCENTILE).
    axis: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    anchors: tuple[float, float] = (0.0, 1.0)
    # Unit vector to the centroid of the plain background (both languages), and the mean
    # cosine of the plain Chinese and of the plain English lines to it (`hub`).
    centroid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    hub_levels: tuple[float, float] = (0.0, 0.0)

    def en_share(self, projection: float) -> float:
        """A vector's place between the languages from its cosine to `axis`: 0 Chinese, 1
        English, clipped (see LANGUAGE_TAIL_PERCENTILE)."""
        lo, hi = self.anchors
        return float(min(1.0, max(0.0, (projection - lo) / (hi - lo))))

    def en_shares(self, vectors: np.ndarray) -> np.ndarray:
        """`en_share` of each row of `vectors` (any norm), for the evals' in-memory legs."""
        v = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(v, axis=1)
        proj = (v @ self.axis) / np.where(norms > 0, norms, 1.0)
        lo, hi = self.anchors
        return np.clip((proj - lo) / (hi - lo), 0.0, 1.0)

    def hub(self, centroid_cosine: float, en_share: float) -> float:
        """A vector's hub figure from its cosine to `centroid`: that cosine less the
        background's own level for its language (`_hub_level`). Above 0: nearer to everyday
        text than lines of its language usually are. 0 without a centroid."""
        if self.centroid.size == 0:
            return 0.0
        return float(centroid_cosine - self._hub_level(en_share))

    def hubs(self, vectors: np.ndarray, en_shares: Sequence[float] | np.ndarray) -> np.ndarray:
        """`hub` of each row of `vectors` (any norm), for the evals' in-memory legs."""
        v = np.asarray(vectors, dtype=np.float32)
        if self.centroid.size == 0:
            return np.zeros(len(v))
        norms = np.linalg.norm(v, axis=1)
        cos = (v @ self.centroid) / np.where(norms > 0, norms, 1.0)
        return cos - self._hub_level(np.asarray(en_shares, dtype=float))

    def _hub_level(self, en_share):
        """The Chinese and English lines' mean cosine to the centroid, mixed by `en_share`
        (`label_share` when the embedder gives no axis); a number or an array of them."""
        zh, en = self.hub_levels
        return (1.0 - en_share) * zh + en_share * en

    @classmethod
    def from_vectors(cls, vectors: Sequence[np.ndarray] | np.ndarray,
                     entries: Sequence[BackgroundEntry] | None = None) -> BackgroundVectors:
        entries = load_background() if entries is None else entries
        matrix = np.asarray(np.vstack(list(vectors)), dtype=np.float32)
        if matrix.shape[0] != 2 * len(entries):
            raise ValueError(f"{matrix.shape[0]} vectors for {2 * len(entries)} background texts")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms > 0, norms, 1.0)
        n = len(entries)
        groups = {}
        for lang in ("zh", "en"):
            rows = [i for i, e in enumerate(entries) if e.lang == lang]
            if not rows:
                raise ValueError(f"the background has no {lang} sentence")
            groups[(lang, False)] = np.asarray(rows)
            groups[(lang, True)] = np.asarray(rows) + n
        zh, en = matrix[groups[("zh", False)]], matrix[groups[("en", False)]]
        centroid = np.vstack([zh, en]).mean(axis=0)
        centroid = (centroid / max(float(np.linalg.norm(centroid)), 1e-12)).astype(np.float32)
        hub = {"centroid": centroid,
               "hub_levels": (float((zh @ centroid).mean()), float((en @ centroid).mean()))}
        axis = en.mean(axis=0) / np.linalg.norm(en.mean(axis=0)) - zh.mean(axis=0) / np.linalg.norm(
            zh.mean(axis=0))
        axis = (axis / max(float(np.linalg.norm(axis)), 1e-12)).astype(np.float32)
        lo = float(np.percentile(zh @ axis, 100 - LANGUAGE_TAIL_PERCENTILE))
        hi = float(np.percentile(en @ axis, LANGUAGE_TAIL_PERCENTILE))
        if hi <= lo:  # the embedder does not separate the two backgrounds: labels decide
            return cls(matrix, groups, **hub)
        return cls(matrix, groups, axis, (lo, hi), **hub)

    @property
    def has_axis(self) -> bool:
        return self.axis.size > 0


@dataclass(frozen=True)
class Background:
    """One query's mean cosine to the background sentences, per (language, tagged form).

    This is the query's own "unrelated text" level: a query that is close to everything (a
    hub, a generic question) has a high mean, and a Chinese query's cosines to English text
    run lower than to Chinese text, so subtracting the mean of the fact's own language and
    form takes out per-query hubness and most of the cross-language offset at once, and it
    does not depend on how many facts the bank holds.
    """

    means: Mapping[tuple[str, bool], float]

    @classmethod
    def for_query(cls, query_vector: np.ndarray, vectors: BackgroundVectors) -> Background:
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        cos = vectors.matrix @ (q / norm if norm > 0 else q)
        return cls({key: float(cos[rows].mean()) for key, rows in vectors.groups.items()})

    def mean(self, doc_lang: str | None, tagged: bool) -> float:
        """The background mean for a fact of this language and form.

        A mixed or unlabelled fact takes the higher of the two languages' means: it is never
        credited with the cross-language gap it may not have (measured: the average of the two
        lifted the mixed lines of a Chinese corpus over its Chinese answers).
        """
        if doc_lang in ("zh", "en"):
            return self.means[(doc_lang, tagged)]
        return max(self.means[("zh", tagged)], self.means[("en", tagged)])


# --- the parameters ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FusionParams:
    """Every constant of fuse() and the gate, with the reason for its value; the measurements
    are in evals/reports/fusion-notes.md, under the section each comment links."""

    # Lexical evidence added to the cosine when query and fact share a language (or either is
    # mixed): weight * (coverage_share * coverage + (1 - coverage_share) * bm25 / best bm25).
    lexical_weight: float = 0.04
    coverage_share: float = 0.5
    # Across languages: weight * coverage only (BM25 magnitude there is confident noise).
    cross_lexical_weight: float = 0.02
    # What background centring leaves of the language-pair effect, for facts without tags
    # (cosine units; zh>zh is the reference): each the smallest offset that keeps every set
    # of its pair within 2 points of R@5 at the gate (zh>en: tatoeba-zh2en, xquad-r-zh2en;
    # en>zh: xquad-r-en2zh; en>en: xquad-r-en2en, where answers score higher, hence < 0),
    # rounded up (fusion-notes.md#calibration). A mixed side gets none.
    offset_zh_en: float = 0.0210
    offset_en_zh: float = 0.0251
    offset_en_en: float = -0.0416
    offset_mixed: float = 0.0
    # Facts saved with tags are embedded with them and centred on the tagged background; this
    # offset puts them on the gate's scale, whatever the language pair: the agent-memory set
    # (all tagged) loses at most 6 points of answerable R@5 as injected, every fact clearing
    # the gate itself, which leaves the tagged gate at 0.0471, where the fact-by-fact floor
    # was (fusion-notes.md#the-tagged-offset-why-6-points). Its cross-lingual answers need no
    # pair offset: tags bridge.
    offset_tagged: float = 0.0321
    # The confidence (cosine + lexical - background mean + offset) that is the gate: the
    # highest that costs <= 2 points of R@5 on each zh>zh dev set with companions down to
    # gate - companion_drop, rounded down (fusion-notes.md#calibration).
    center: float = 0.0774
    # Logistic width of the confidence -> relevance squash (chosen, not fitted).
    scale: float = 0.01
    # The floor on relevance. 0.5 = the calibrated floor; raise it to refuse more. It is a
    # gate on the query: the best hit must reach it, or nothing at all is returned.
    floor: float = 0.5
    # Once the best hit has passed the gate, the others it brings need only a confidence
    # within this much of the gate (cosine units): a query whose best answer is good enough
    # keeps its weaker golds, so the gate can sit higher. Search only: what is injected
    # unasked clears the gate fact by fact. The refusals stop growing at 0.02
    # (fusion-notes.md#gate-and-companions).
    companion_drop: float = 0.02
    # With no dense leg at all (embedder down), a lexical hit needs at least this much lexical
    # evidence (0-1) to clear the floor: only near-complete, strongest matches survive.
    lexical_only_min_evidence: float = 0.75
    # Ranking only: BM25's top hit, in the query's language, earns apart_weight more when it
    # stands apart from BM25's own next hits (`decisive_lexical`: its lead over the second is
    # at least apart_ratio x the second's lead over the median of ranks 2-10). Why: RRF gives
    # a rank-1 lexical hit as much as a rank-1 dense hit, this fusion ~0.04 cosine units, so a
    # sentence every query term finds far above the rest lost to dense neighbours (cmrc2018
    # `2012年5月获得教育局同意增设什么？`: BM25 32.0 against 10.3, its lead 13.6x the
    # runner-up's, cosine rank 71, hybrid rank 16, 0.007 short of the top 5). Measured in
    # memory on every dev set and bank (evals/reports/2026-12-05/hybrid-floor.md): R@5
    # cmrc2018-trial hybrid 0.995 -> 0.996, every other set and split unchanged, at any weight
    # 0.02-0.06 and ratio 2.5-8. The ratio is 8, not 3, for MRR@10: at 3 (weight 0.04) a wrong
    # but apart BM25 top hit moved above golds inside the top 5 (agent-memory questions 0.825
    # -> 0.820, the mixed bank 0.757 -> 0.753); at 8 with 0.02, agent-memory is unchanged,
    # the mixed bank -0.05 point, cmrc2018-trial and xquad-r-zh2zh +0.1. Measured against
    # it: a flat lexical_weight 0.05 (xquad-r-zh2zh R@5 0.948 -> 0.946, agent-memory
    # questions 0.916 -> 0.904) and a rank-aware term 0.02 x 3 / (2 + rank) for ranks 1-3
    # (xquad-r-zh2zh +1 query, mlqa-r-zh-dev 0.831 -> 0.823, mixed zh>en 0.808 -> 0.795).
    # The gate keeps the calibrated confidence (a stray rare term standing apart must not
    # open it for a question the bank cannot answer).
    apart_weight: float = 0.02
    apart_ratio: float = 8.0
    # Background means used when the caller passes no Background (not wired, or failed):
    # the medians measured on the dev and agent-memory queries, by (query > fact) language
    # and form. A fallback only: a fixed mean cannot remove the query's own hubness (the
    # "no bg" column of fusion-notes.md#final-table shows what it costs).
    fallback_mean_zh_zh: float = 0.807
    fallback_mean_en_en: float = 0.716
    fallback_mean_zh_en: float = 0.717
    fallback_mean_en_zh: float = 0.698
    fallback_mean_tagged: float = 0.791
    # Ranking only (the gate keeps the background confidence above): each dense hit is
    # centred on bank_share x the mean raw cosine of the query's bank_cohort nearest vectors
    # in the hit's language group (Chinese, the rest) plus (1 - bank_share) x its background
    # level (mean - offset). The background alone lifts the other language as much as it
    # lifts unrelated text, which in a bank whose zh and en facts share subjects buries
    # same-language answers; the cohort alone loses the cross-language answers of a bank
    # whose languages hold different subjects. 0.5 is the only share that keeps every
    # XQuAD-R pair within 3 points of its single-language bank and no pair more than 1 point
    # under plain cosine (fusion-notes.md#writer-questions-and-mixed-language-banks).
    bank_share: float = 0.5
    bank_cohort: int = 50
    # A writer question is short and phrased as a question, so any question (an off-topic one
    # too) lands closer to it than to a statement: on the gate's scale a question vector
    # counts this much less. -0.03 is the last step before answerable queries pay (and gives
    # back the refusals of the bank before questions existed). Gate only: the ranking is
    # unaffected (fusion-notes.md#question-vectors-offset_question).
    offset_question: float = -0.03
    # The gate's offsets above were recalibrated (`fusion_sweep`) once the gate read
    # each vector's language from the embedder (`en_share`): English sentences whose share is
    # under 1 lost part of their lift on the gate's scale (xquad-r-zh2en with the gate 0.818
    # -> 0.801 at the old zh>en offset), while stray non-Chinese lines stopped opening it
    # (cmrc questions against the xquad-r zh bank refused 0.31 -> 0.88). The ranking keeps
    # the offsets it was measured with: the recalibrated zh>en offset in the ranking cost
    # native Chinese 0.8 point (mlqa-r-zh-dev dense 0.815 -> 0.807).
    rank_offset_zh_en: float = 0.0134
    rank_offset_en_zh: float = 0.0235
    rank_offset_tagged: float = 0.0303
    # Ranking only: a fact's own vector ranks by its cosine less hub_weight x its hub figure
    # (`BackgroundVectors.hub`: its cosine to the plain background's centroid, less the
    # background's own level for its language). A line near everything generic (a stock
    # phrase, a bare id, boilerplate) is near every query as well, and took places from
    # answers. Measured in memory on every dev set and bank at 0.15 / 0.25 / 0.35 / 0.5
    # (evals/reports/2026-12-06/hubs-2.md): at 0.25, R@5 dense / hybrid mlqa-r-zh-dev 0.819 /
    # 0.831 -> 0.839 / 0.855, xquad-r-zh2en 0.859 -> 0.880, xquad-r-en2zh 0.883 -> 0.896,
    # xquad-r-zh2zh 0.937 / 0.948 -> 0.943 / 0.951, the mixed bank 0.873 / 0.884 -> 0.884 /
    # 0.891, cmrc2018 and tatoeba unchanged or +1 query; 47 splits rose, 45 held, 10 fell by
    # one or two queries (hybrid en>en of the mixed banks, the half-questions bank). At 0.35
    # tatoeba-zh2en lost a query. Writer questions and tagged facts are left as they are
    # (`ranked_hits`): a question is meant to sit near the questions people ask, and the
    # agent-memory banks saved with tags are unchanged by construction. The gate keeps the
    # calibrated confidence.
    hub_weight: float = 0.25


DEFAULT = FusionParams()

_CROSS = {("zh", "en"), ("en", "zh")}


def label_share(lang: str | None) -> float:
    """The `en_share` a vector's label stands for when the embedder gives no language axis:
    Chinese 0, anything else 1 (the rest group of the dense leg)."""
    return 0.0 if lang == "zh" else 1.0


def language_pair(query_lang: str, doc_lang: str | None) -> str:
    """"same", "zh>en", "en>zh" or "mixed" (either side mixed, unknown or another label)."""
    if doc_lang is None:
        return "mixed"
    if query_lang == doc_lang and query_lang in ("zh", "en"):
        return "same"
    if (query_lang, doc_lang) in _CROSS:
        return f"{query_lang}>{doc_lang}"
    return "mixed"


def _offset(query_lang: str, doc_lang: str | None, tagged: bool, params: FusionParams,
            ranking: bool = False) -> float:
    if tagged:
        return params.rank_offset_tagged if ranking else params.offset_tagged
    pair = language_pair(query_lang, doc_lang)
    if pair == "same":
        return params.offset_en_en if query_lang == "en" else 0.0
    if pair == "zh>en":
        return params.rank_offset_zh_en if ranking else params.offset_zh_en
    if pair == "en>zh":
        return params.rank_offset_en_zh if ranking else params.offset_en_zh
    return params.offset_mixed


def _fallback_mean(query_lang: str, doc_lang: str | None, tagged: bool,
                   params: FusionParams) -> float:
    if tagged:
        return params.fallback_mean_tagged
    pair = language_pair(query_lang, doc_lang)
    if pair == "zh>en":
        return params.fallback_mean_zh_en
    if pair == "en>zh":
        return params.fallback_mean_en_zh
    if query_lang == "en" and pair == "same":
        return params.fallback_mean_en_en
    return params.fallback_mean_zh_zh


def lexical_evidence(hit: LegHit, best_bm25: float, query_terms: int, pair: str,
                     params: FusionParams = DEFAULT) -> float:
    """The cosine-unit bonus a lexical hit earns: coverage, plus relative BM25 in-language."""
    if query_terms <= 0 or hit.matched_terms <= 0:
        return 0.0
    coverage = min(1.0, hit.matched_terms / query_terms)
    if pair in ("zh>en", "en>zh"):
        return params.cross_lexical_weight * coverage
    relative = hit.score / best_bm25 if best_bm25 > 0 else 0.0
    share = params.coverage_share
    return params.lexical_weight * (share * coverage + (1.0 - share) * relative)


def decisive_lexical(lexical: Sequence[LegHit], params: FusionParams = DEFAULT) -> int | None:
    """BM25's top hit when it stands apart from BM25's own next hits (`apart_ratio`), else
    None. Needs three hits: with fewer, BM25 has no distribution of its own to stand out of."""
    ranked = sorted(lexical, key=lambda h: (-h.score, h.fact_id))
    if len(ranked) < 3:
        return None
    s1, s2 = ranked[0].score, ranked[1].score
    median = float(np.median([h.score for h in ranked[1:10]]))
    if s1 > s2 and s1 - s2 >= params.apart_ratio * (s2 - median):
        return ranked[0].fact_id
    return None


def ranked_hits(dense: Sequence[LegHit], params: FusionParams = DEFAULT,
                tagged: Mapping[int, bool] | None = None) -> list[LegHit]:
    """The dense hits as the ranking sees them: a fact's own vector less `hub_weight` x its
    hub figure. Writer questions and facts saved with tags as they are: a tagged fact is
    embedded with its tags and compared with the tagged background, not the plain one the
    figure is read on, and on the tags-only agent bank the figure moved its answers both
    ways (crosslingual -2 queries, paraphrase +2; hubs-2.md)."""
    tagged = tagged or {}
    return [h if h.form == "question" or not h.hub or tagged.get(h.fact_id)
            else replace(h, score=h.score - params.hub_weight * h.hub) for h in dense]


def cohort_means(dense: Sequence[LegHit], doc_lang: Mapping[int, str] | None = None,
                 params: FusionParams = DEFAULT,
                 doc_tagged: Mapping[int, bool] | None = None) -> dict[bool, float]:
    """The mean raw cosine of the query's `bank_cohort` nearest vectors in each language group
    (True: Chinese, False: the rest), from the dense leg's candidates (taken per group)."""
    langs = doc_lang or {}
    groups: dict[bool, list[float]] = {}
    for hit in ranked_hits(dense, params, doc_tagged):
        lang = hit.lang if hit.lang is not None else langs.get(hit.fact_id)
        groups.setdefault(lang == "zh", []).append(hit.score)
    return {g: float(np.mean(sorted(v, reverse=True)[: params.bank_cohort]))
            for g, v in groups.items()}


def raw_scores(c: Candidates, params: FusionParams = DEFAULT, *,
               cohort: Mapping[bool, float] | None = None) -> list[tuple[int, float]]:
    """Every candidate's confidence (cosine units, 0 = as close as unrelated text), best first,
    ties by fact id. This is the scale the gate was measured on; `fuse` squashes it to [0, 1].

    With `cohort` (`cohort_means` of the same dense hits) it is the ranking score instead:
    each dense hit's level blends its language group's cohort mean with its background level
    (`bank_share`), and a fact's own vector counts less by its hub figure (`ranked_hits`).
    Rank by it; gate by the plain confidence.
    """
    lexical, dense, query_terms, query_lang = c.lexical, c.dense, c.query_terms, c.query_lang
    langs, tags, background = c.doc_lang, c.doc_tagged, c.background
    if cohort is not None:
        dense = ranked_hits(dense, params, tags)
    cos: dict[int, float] = {}
    for h in dense:
        cos[h.fact_id] = max(cos.get(h.fact_id, -math.inf), h.score)
    impute = min(cos.values()) if cos else 0.0
    best_bm25 = max((h.score for h in lexical), default=0.0)

    bonus: dict[int, float] = {}
    for hit in lexical:
        # With no dense leg (embedder down, or lexical mode) BM25 is the only evidence there
        # is: it keeps its in-language weight, so an identifier such as `E0502` found in a
        # Chinese fact still counts in full; the lexical-only bar below guards against noise.
        pair = language_pair(query_lang, langs.get(hit.fact_id)) if cos else "same"
        ev = lexical_evidence(hit, best_bm25, query_terms, pair, params)
        bonus[hit.fact_id] = max(bonus.get(hit.fact_id, 0.0), ev)
    lifted = None
    if cohort is not None and cos and (top := decisive_lexical(lexical, params)) is not None:
        if language_pair(query_lang, langs.get(top)) not in ("zh>en", "en>zh"):
            bonus[top] += params.apart_weight
            lifted = top

    def base_level(lang: str | None, tagged: bool) -> float:
        mean = (background.mean(lang, tagged) if background is not None
                else _fallback_mean(query_lang, lang, tagged, params))
        return mean - _offset(query_lang, lang, tagged, params, ranking=cohort is not None)

    def level(lang: str | None, tagged: bool, question: bool = False,
              en_share: float | None = None) -> float:
        """What this query scores against unrelated text of this language and form: the
        background mean less the pair offset, blended with the bank's cohort when ranking.
        With `en_share` (where the embedder places the vector): the Chinese and English
        levels in that proportion, whatever the text's label. Ranking (with a cohort) and
        the gate each use their own offsets (`rank_offset_*`)."""
        if en_share is not None:
            return ((1 - en_share) * level("zh", tagged, question)
                    + en_share * level("en", tagged, question))
        base = base_level(lang, tagged)
        if cohort is not None and (lang == "zh") in cohort:
            return params.bank_share * cohort[lang == "zh"] + (1 - params.bank_share) * base
        if cohort:
            # No vector of this group in the bank, so no cohort of its own: the other group's
            # cohort, shifted by the background's gap between the two.
            other = next(iter(cohort))
            other_base = base_level("zh" if other else "en", tagged)
            return base + params.bank_share * (cohort[other] - other_base)
        return base - (params.offset_question if question else 0.0)

    # Each dense hit is centred on its own vector's language and form; a fact scores by its
    # best vector (docs/principles.md#the-writer-asks-the-questions: a fact matches by its best
    # vector).
    dense_conf: dict[int, float] = {}
    for hit in dense:
        lang = hit.lang if hit.lang is not None else langs.get(hit.fact_id)
        question = hit.form == "question"
        tagged = bool(tags.get(hit.fact_id, False)) and not question
        conf = hit.score - level(lang, tagged, question, hit.en_share)
        if conf > dense_conf.get(hit.fact_id, -math.inf):
            dense_conf[hit.fact_id] = conf
    out = []
    for fid in cos.keys() | bonus.keys():
        if not cos:
            # Lexical leg alone: no cosine to centre, so only strong lexical evidence clears.
            conf = (params.center + bonus[fid]
                    - params.lexical_weight * params.lexical_only_min_evidence)
        elif fid in dense_conf:
            conf = dense_conf[fid] + bonus.get(fid, 0.0)
        else:
            # Found by the lexical leg only: its cosine is at most the lowest the dense leg
            # returned.
            conf = impute - level(langs.get(fid), bool(tags.get(fid, False))) + bonus[fid]
        out.append((fid, conf))
    if lifted is not None:
        out = _level_at_most(out, lifted, params.apart_weight)
    out.sort(key=lambda item: (-item[1], item[0]))
    return out


# How far above the best other hit a lifted hit may end: a tie-break, not a gap.
LIFT_TIE = 1e-4


def _level_at_most(scored: list[tuple[int, float]], lifted: int,
                   weight: float) -> list[tuple[int, float]]:
    """The decisive lexical lift orders, it never opens a gap: the lifted hit ends at most
    LIFT_TIE above the best other hit (never below where it stood without the lift). Uncapped,
    +0.02 on a hit that was already first, or that it made first, could push the hits under
    it out of the prompt block, which keeps hits within 0.015 of the best
    (inject.PROMPT_MARGIN; test_fusion builds such a case). No eval query was found to hit
    it: the agent-memory inject row that first looked like one is the same at 5bd3437, before
    the lift (evals/reports/2026-12-05b/same-machine-gate.md). The order the lift makes here
    is unchanged; the ranking's trust and project terms (search._rank) may then break the tie
    it leaves."""
    others = [conf for fid, conf in scored if fid != lifted]
    if not others:
        return scored
    cap = max(others) + LIFT_TIE
    return [(fid, max(conf - weight, min(conf, cap)) if fid == lifted else conf)
            for fid, conf in scored]


def relevance(raw: float, params: FusionParams = DEFAULT) -> float:
    """Squash a confidence into [0, 1]: 0.5 at the calibrated floor, logistic around it."""
    z = (raw - params.center) / params.scale
    if z < -60:
        return 0.0
    return 1.0 / (1.0 + math.exp(-z))


def fuse(c: Candidates, params: FusionParams = DEFAULT) -> list[tuple[int, float]]:
    """Fuse both legs into [(fact_id, relevance in [0, 1])], best first, ties by fact id.

    Every candidate is returned, so the gate (`apply_floor`) can count what it removes.
    Relevance is comparable across queries, language pairs and bank sizes, which is what lets
    one gate serve them all.
    """
    return [(fid, relevance(score, params)) for fid, score in raw_scores(c, params)]


def companion_floor(params: FusionParams = DEFAULT) -> float:
    """The relevance the other hits need once the best one has passed the gate."""
    gate = params.center + params.scale * math.log(params.floor / (1.0 - params.floor))
    return relevance(gate - params.companion_drop, params)


class Passed(NamedTuple):
    """A hit the gate let through: `companion` when it is below the gate itself and came
    only because a better hit of the same query cleared it."""

    fact_id: int
    relevance: float
    companion: bool


@dataclass(frozen=True)
class Gated:
    """What the gate let through, best first, and how many candidates it refused."""

    passed: list[Passed]
    below: int


def apply_floor(fused: Sequence[tuple[int, float]], params: FusionParams = DEFAULT, *,
                companions: bool = True, lexical_only: bool = False,
                eligible: Container[int] | None = None, use_floor: bool = True) -> Gated:
    """The gate: nothing unless the best eligible hit reaches `params.floor`
    (docs/principles.md#nothing-rather-than-noise:
    nothing rather than noise); after it, the hits at or above the companion floor.

    One number for every language: the language pair is already folded into each score
    (the `offset_*`), so the gate takes no query language.

    `fused` is `fuse`'s output, best first. `eligible` (the recall service's: facts that
    still hold, in the asked category, superseded ones standing for their successor) says
    which candidates may be returned at all; an ineligible hit neither passes nor opens the
    gate for the others, and is not counted as refused. Every hit must clear the gate itself
    with `companions=False` (what is injected unasked) and with `lexical_only` (no dense leg:
    companions were calibrated on fused scores, and with the lexical leg alone only strong
    matches reach the gate, `lexical_only_min_evidence`). `use_floor=False`: no gate, every
    eligible hit passes (the evals' unfloored runs). `below` counts the candidates under the
    floor that applied to them: the gate before the first hit passed, the companion floor
    after it.
    """
    if use_floor:
        gate = params.floor
        after = companion_floor(params) if companions and not lexical_only else gate
    else:
        gate = after = -math.inf
    passed: list[Passed] = []
    below = 0
    for fact_id, rel in fused:
        if rel < (after if passed else gate):
            below += 1
            continue
        if eligible is not None and fact_id not in eligible:
            continue
        passed.append(Passed(fact_id, rel, bool(passed) and rel < gate))
    return Gated(passed, below)
