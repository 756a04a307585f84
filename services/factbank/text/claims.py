"""Is a near-duplicate the same claim, or a correction? (MISSION
docs/principles.md#corrections-do-not-reinforce)

"The API listens on port 8080" and "... port 8081" are near-identical by any similarity measure
and opposite claims. Reinforcing the old fact with the new one would turn a correction into
more confidence in the error. So a near-duplicate counts as THE SAME claim only when all three
hold, checked in this order:

1. Same numbers. Every digit run (ports, versions, error codes' digits, IPs) must match, plus
   numbers written as words (`two`, `三个`). Quantities with units are compared as amounts:
   `30s` = `30 seconds` = `30 秒`; byte sizes are the same claim when some reading of the units
   makes them equal, because `GB` is written for both 10^9 and 2^30 bytes: `2 GB` = `2 GiB` =
   `2048 MB` = `2000 MB`, but `2000 MB` != `2 GiB` and `2 GB` != `3 GB`. The same amount in
   another notation is the same claim; a different amount never is. `v1.2` = `1.2`, but `1.2`
   != `1.2.0` (it may mean the 1.2 line) and `1.2` != `1.3`.
2. Same negations. The same number of negation markers (English not/no/never/without/n't...,
   Chinese 不/没/没有/别/勿/无/非/未/不要/禁止...), and each negation covers a compatible
   scope: the key words after the marker up to the end of the clause, where one scope must
   contain the other. So "use pnpm, not npm" = "don't use npm, use pnpm", but
   "use pnpm, not npm" != "use npm, not pnpm".
3. Key-word containment. The key words (whole tokens from `tokenizer.words`, minus stopwords,
   negation markers and numbers) of one text are all found in the other's: rewording, reordering
   and added detail stay the same claim. Tolerance is deliberately narrow: inflection only
   (`listen`/`listens`/`listening`, `dependency`/`dependencies`) and a Chinese word inside a
   longer one (`装` in `安装`). No "one missing word is fine": the dangerous correction is exactly
   one swapped word ("use yarn" after "use pnpm").

Two deliberate departures from `tokenizer.tokenize`:
- Whole tokens only, no identifier parts: parts would make `blocking` look contained in
  `non-blocking`.
- Some retrieval stopwords are key words here (`on/off`, `in/out`, `all/only`, modal verbs):
  "turn caching off" must not be contained in "turn caching on".

The cost of an error is asymmetric: calling a correction "the same" silently reinforces a wrong
fact; calling a rewording "different" only stores a second fact flagged as a possible supersede.
Every rule above errs towards "different".
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from factbank.text.tokenizer import STOPWORDS, words

# Near neighbours: two facts' own vectors this close are candidates for the same claim, which
# `compare` then decides (a near-duplicate by similarity can be a correction).
NEAR = 0.90  # cosine of e5-small passages: "port 8080" vs "port 8081" 0.988, unrelated ~0.86


@dataclass(frozen=True, slots=True)
class ClaimComparison:
    """Whether `new` makes the same claim as `old`, and a reason a human can audit."""

    same_claim: bool
    reason: str


# --- negation -------------------------------------------------------------------------------

EN_NEGATIONS = frozenset(
    "not no never none nor neither nobody nothing nowhere without cannot".split()
)
ZH_NEGATIONS = frozenset(
    """不 没 没有 别 勿 无 非 未 莫 甭 毋 不要 禁止 不用 不能 不会 不可 不可以 不得 不应 不应该
    不该 无需 无须 不必 不需要 无法 切勿 请勿 严禁 不再 并非 不是 未能 从不 从未 绝不 决不 别再
    不准 不许 没法 不一定 尚未 不支持""".split()
)
# Words that start like a negation but are not one.
_NOT_NEGATIONS = frozenset(
    """不错 不同 不仅 不过 不断 不少 不久 不管 不论 不如 不但 不只 不光 不然 不禁 不得不 不外乎
    没错 不止 不时 不住 不料 别名 别人 别的 别处 别称 别墅 别致 别针""".split()
)

# Retrieval stopwords that change a claim's meaning; they count as key words here.
POLAR = frozenset(
    """on off in out up down over under more most all any only some few same other both each
    than against can could will would shall should may might must ought
    可以 能 能够 会 要 应该 应 已经 正在 将 都""".split()
)
_CLAIM_STOPWORDS = (STOPWORDS - POLAR) - EN_NEGATIONS


def _is_negation(word: str) -> bool:
    if word in EN_NEGATIONS or word in ZH_NEGATIONS or word.endswith("n't"):
        return True
    # jieba glues a negation to a short verb (不好, 没用, 别用); the list above is the exceptions.
    return word[:1] in "不没别" and word not in _NOT_NEGATIONS and len(word) <= 3


# --- numbers --------------------------------------------------------------------------------

_BYTE_UNITS = {
    "b": (1,), "byte": (1,), "bytes": (1,),
    "kb": (10**3, 2**10), "kib": (2**10,),
    "mb": (10**6, 2**20), "mib": (2**20,),
    "gb": (10**9, 2**30), "gib": (2**30,),
    "tb": (10**12, 2**40), "tib": (2**40,),
}  # fmt: skip
_TIME_UNITS = {
    "ms": 0.001, "msec": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "毫秒": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "秒": 1, "秒钟": 1,
    "min": 60, "mins": 60, "minute": 60, "minutes": 60, "分钟": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "小时": 3600,
    "d": 86400, "day": 86400, "days": 86400, "天": 86400,
    "week": 604800, "weeks": 604800, "周": 604800,
}  # fmt: skip
_UNIT_ALT = "|".join(
    sorted((re.escape(u) for u in [*_BYTE_UNITS, *_TIME_UNITS, "%"]), key=len, reverse=True)
)
_QUANTITY = re.compile(rf"(?<![\w.])(\d+(?:\.\d+)?)\s*({_UNIT_ALT})(?![a-z0-9_])")
_DIGITS = re.compile(r"\d+(?:\.\d+)*")
_NUMBER_TOKEN = re.compile(r"^v?\d+(?:\.\d+)*$")

# "one" is left out: it is usually a pronoun or an article, not a count.
_EN_NUMBER_WORDS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "hundred": 100, "thousand": 1000, "twice": 2, "double": 2, "triple": 3,
}  # fmt: skip
_ZH_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4,
    "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_ZH_MULTIPLIERS = {"十": 10, "百": 100, "千": 1000}
_ZH_NUMBER = re.compile(r"^([零〇一二两三四五六七八九十百千万]+)([个台次条位种项倍层组核节遍份])?$")

Quantity = tuple[str, frozenset[float], str]  # dimension, possible base amounts, as written


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")


def _zh_int(numeral: str) -> int:
    """Parse a Chinese numeral: 三 -> 3, 十二 -> 12, 两百五十 -> 250, 二〇二五 -> 2025."""
    if not any(c in numeral for c in "十百千万"):
        return int("".join(str(_ZH_DIGITS[c]) for c in numeral))
    total = section = digit = 0
    for c in numeral:
        if c in _ZH_DIGITS:
            digit = _ZH_DIGITS[c]
        elif c == "万":
            total += (section + digit) * 10000
            section = digit = 0
        else:
            section += (digit or 1) * _ZH_MULTIPLIERS[c]
            digit = 0
    return total + section + digit


def _word_number(word: str) -> int | None:
    """The value of a number written in words, or None. A bare 一 is an article, not a count."""
    if word in _EN_NUMBER_WORDS:
        return _EN_NUMBER_WORDS[word]
    m = _ZH_NUMBER.match(word)
    if m and m.group(1) != "一":
        return _zh_int(m.group(1))
    return None


def _split_quantities(text: str) -> tuple[list[Quantity], str]:
    """Quantities with units as (dimension, possible base amounts), and the text without them."""
    found: list[Quantity] = []
    for m in _QUANTITY.finditer(text):
        value, unit, written = float(m.group(1)), m.group(2), m.group(0)
        if unit in _BYTE_UNITS:
            found.append(("bytes", frozenset(value * f for f in _BYTE_UNITS[unit]), written))
        elif unit in _TIME_UNITS:
            found.append(("seconds", frozenset({value * _TIME_UNITS[unit]}), written))
        else:
            found.append(("percent", frozenset({value}), written))
    return found, _QUANTITY.sub(" ", text)


def _plain_numbers(text: str, text_words: list[str]) -> set[str]:
    """Digit runs (8080, 3.11, 0502 of E0502 as 502) and numbers written as words."""
    out = set()
    for run in _DIGITS.findall(text):
        out.add(str(int(run)) if "." not in run else run)
    for w in text_words:
        n = _word_number(w)
        if n is not None:
            out.add(str(n))
    return out


def _quantities_match(a: list[Quantity], b: list[Quantity]) -> bool:
    def found_in(q: Quantity, others: list[Quantity]) -> bool:
        return any(
            q[0] == o[0] and any(abs(x - y) <= 1e-9 * max(abs(x), 1) for x in q[1] for y in o[1])
            for o in others
        )

    return all(found_in(q, b) for q in a) and all(found_in(q, a) for q in b)


# --- key words ------------------------------------------------------------------------------

_CJK = re.compile(r"^[\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+$")
_SUFFIXES = ("ations", "ation", "ments", "ment", "ing", "ies", "ied", "es", "ed", "s", "d")


def _is_key(word: str) -> bool:
    return not (
        word in _CLAIM_STOPWORDS
        or _is_negation(word)
        or _NUMBER_TOKEN.match(word)
        or _word_number(word) is not None
    )


def _key_words(text_words: list[str]) -> set[str]:
    return {w for w in text_words if _is_key(w)}


def _stems(word: str) -> set[str]:
    """The word and its possible bases after one English inflection: `caching` -> cache, cach.

    Deliberately over-generates bases (either `cach` or `cache` is right) and compares sets,
    rather than shipping a stemmer: two inflections of one word always share a base, and a
    base of 3+ letters rarely joins two different words.
    """
    out = {word}
    if len(word) < 3 or not (word.isascii() and word.isalpha()):
        return out
    for suf in _SUFFIXES:
        if not word.endswith(suf):
            continue
        base = word[: -len(suf)]
        if suf in ("ies", "ied"):
            base += "y"
        if len(base) >= 3:
            out.add(base)
        if suf in ("ing", "ed", "es", "ation", "ations") and len(base) >= 2:
            out.add(base + "e")  # using -> use
        if suf in ("ing", "ed") and len(base) >= 4 and base[-1] == base[-2]:
            out.add(base[:-1])  # logging -> log
    return out


def _same_word(a: str, b: str) -> bool:
    """Equal, the same English word inflected, or a Chinese word inside a longer one (a in b)."""
    if a == b:
        return True
    if _CJK.match(a) and _CJK.match(b):
        return a in b
    return bool(_stems(a) & _stems(b))


def _missing(small: set[str], large: set[str]) -> set[str]:
    """Words of `small` with no counterpart in `large`."""
    return {w for w in small if not any(_same_word(w, x) for x in large)}


# --- negation scopes ------------------------------------------------------------------------

_CLAUSE_BREAK = re.compile(r"[,;!?()\[\]\"\n、。，；！？（）“”—]|[.:](?=\s|$)|\s-\s|\bbut\b")


def _negation_scopes(text: str) -> list[set[str]]:
    """For each negation marker, the key words after it in its clause."""
    scopes = []
    for clause in _CLAUSE_BREAK.split(text):
        clause_words = words(clause)
        for i, w in enumerate(clause_words):
            if _is_negation(w):
                scopes.append(_key_words(clause_words[i + 1 :]))
    return scopes


def _scopes_match(a: list[set[str]], b: list[set[str]]) -> bool:
    """Same count, and each scope pairs with a distinct scope that contains it or is inside it."""
    if len(a) != len(b):
        return False
    free = list(b)
    for scope in a:
        for j, other in enumerate(free):
            if not _missing(scope, other) or not _missing(other, scope):
                del free[j]
                break
        else:
            return False
    return True


# --- the comparison -------------------------------------------------------------------------


def _fmt(items: set[str] | list[str]) -> str:
    return ", ".join(sorted(items)) if items else "none"


def compare(new: str, old: str) -> ClaimComparison:
    """Decide whether `new` restates `old` (reinforce) or may correct it (store and link)."""
    n_text, o_text = _normalize(new), _normalize(old)
    if " ".join(n_text.split()) == " ".join(o_text.split()):
        return ClaimComparison(True, "same claim: identical text")

    n_qty, n_rest = _split_quantities(n_text)
    o_qty, o_rest = _split_quantities(o_text)
    n_words, o_words = words(n_rest), words(o_rest)

    if not _quantities_match(n_qty, o_qty):
        return ClaimComparison(
            False,
            f"amounts differ: new has {_fmt([q[2] for q in n_qty])}, "
            f"old has {_fmt([q[2] for q in o_qty])}",
        )
    n_nums, o_nums = _plain_numbers(n_rest, n_words), _plain_numbers(o_rest, o_words)
    if n_nums != o_nums:
        return ClaimComparison(
            False,
            f"numbers differ: new has {_fmt(n_nums - o_nums)}, old has {_fmt(o_nums - n_nums)}",
        )

    n_neg, o_neg = _negation_scopes(n_rest), _negation_scopes(o_rest)
    if len(n_neg) != len(o_neg):
        return ClaimComparison(
            False, f"negation differs: new has {len(n_neg)} negation(s), old has {len(o_neg)}"
        )
    if not _scopes_match(n_neg, o_neg):
        return ClaimComparison(
            False,
            "negation differs: negated "
            + "; ".join(_fmt(s) for s in n_neg)
            + " vs "
            + "; ".join(_fmt(s) for s in o_neg),
        )

    n_keys, o_keys = _key_words(n_words), _key_words(o_words)
    small, large = (n_keys, o_keys) if len(n_keys) <= len(o_keys) else (o_keys, n_keys)
    missing = _missing(small, large)
    if missing and len(n_keys) == len(o_keys):
        small, large = large, small
        missing = _missing(small, large)
    if missing:
        side = "new" if small is n_keys else "old"
        return ClaimComparison(
            False, f"key words differ: {side} has {_fmt(missing)} not found in the other"
        )
    return ClaimComparison(True, "same claim: same numbers, negations and key words")
