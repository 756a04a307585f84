"""The one tokeniser for mixed Chinese/English text, on the index side AND the query side.

Why one module (docs/principles.md#chinese-is-first-class): BM25 only matches what both
sides tokenised the same way.
A second tokeniser anywhere (a query parser, an eval, a test) silently breaks recall, so every
caller imports `tokenize` from here.

How text is cut:
- NFKC first, so full-width `８０８０` and `ＡＰＩ` are the same tokens as their ASCII forms.
- CJK runs go to jieba (precise mode, loaded once, quietly); long words also emit their prefix
  and suffix sub-words (see `_cjk_words` for why and what was measured).
- Everything else is cut at whitespace and at punctuation that never occurs inside a technical
  name. `. - / : @ _ + ~ ' #` are kept inside a piece, so identifiers survive whole:
  `os.path.join`, `/etc/nginx/nginx.conf`, `api.example.com:8443`, `snake_case`, `E0502`,
  `v1.2.3`, `.env`, `--frozen-lockfile` (leading dashes dropped), `c++`.
- Compound identifiers also emit their parts, after the whole token: segments split at `/ : @`
  (so `host:port` gives `host` and `port`, a path gives its directories and file name) and atoms
  split at `. _ - +` and camelCase humps (`getUserById` -> `get user id`). Why: agents and users
  name things partially ("the nginx conf", "port 8443", "snake case"), and a fact that mentions
  `/etc/nginx/nginx.conf` must be reachable from "nginx.conf". The whole token is always kept, so
  an exact identifier query still scores highest (it matches the whole AND every part). Numbers
  and versions are never split (`3.11` must not match port `11`); `v1.2.3` also emits `1.2.3`.
- Lowercase; stopwords dropped; negative contractions (`don't`) count as stopwords here (claims
  reads negations from `words`, which keeps them).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import cache
from typing import Literal

_CJK_CLASS = "\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_CJK_CHAR = re.compile(f"[{_CJK_CLASS}]")
_RUN = re.compile(f"([{_CJK_CLASS}]+)|([^\\s{_CJK_CLASS}]+)")
# Inside a non-CJK run, split at anything that is not a word char or an identifier connector.
_HARD_SPLIT = re.compile(r"[^\w.\-/:@+~'#]+")
_LEADING_PATH = re.compile(r"^(?:~/|\.{1,2}/|/)?(?:\.(?=\w))?")
_EDGE_STRIP = ".-/:@+~'#"
_KEEP_WHOLE_SYMBOLIC = re.compile(r"^[a-z]{1,2}(?:\+\+|#)$", re.IGNORECASE)  # c++, g++, c#, f#
_NUMERIC = re.compile(r"^v?\d+(?:\.\d+)*$", re.IGNORECASE)  # 8080, 3.11, v1.2.3, 10.0.0.5
_SEGMENT_SPLIT = re.compile(r"[/:@]+")
_ATOM_SPLIT = re.compile(r"[._\-+~#']+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")
_HUMP = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_CONTRACTION = re.compile(r"^([^\W\d_]+)'(s|re|ve|ll|d|m)$", re.IGNORECASE)
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]+")

_EN_STOPWORDS = """
a an the and or nor but if then else so as of at by for from to with within without into onto
about against between through during via per than too very just also again further once
i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his
himself she her hers herself it its itself they them their theirs themselves
this that these those there here what which who whom whose when where why how whether
am is are was were be been being have has had having do does did doing done
can could will would shall should may might must ought
all any both each few more most other some such own same only
in on out up down off over under
no not never none cannot
s t e.g i.e eg ie please let lets
"""

_ZH_STOPWORDS = """
的 地 得 之 了 着 过 是 在 和 与 及 跟 同 或 或者 也 都 就 而 而且 并 并且 且 但 但是 则 即
这 那 这个 那个 这些 那些 这里 那里 这样 那样 这么 那么 此 该 其 其中 其他 其它
我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 大家
吧 呢 吗 啊 呀 哦 嘛 啦 么 呗
把 被 让 给 对 对于 从 向 于 以 为 为了 因为 所以 如果 由于 关于 按照 通过 还 又 也是
个 一个 一些 一下 一种 什么 怎么 怎样 如何 哪 哪个 哪些 哪里 谁 为什么 多少 几
可以 能 能够 会 要 应该 应 请 有 没 没有 不 等 等等 就是 还是 已经 正在 将 所 很 非常 比较
"""

STOPWORDS: frozenset[str] = frozenset(_EN_STOPWORDS.split()) | frozenset(_ZH_STOPWORDS.split())
"""Function words of both languages. Deliberately compact: a long list deletes real terms.

Comparison words that flip a claim ("before/after", "less/least") are left out on purpose; the
few very common ones that are in (on/off, in/out, more/most, all/only...) are put back by
`factbank.text.claims`, which must not ignore them.
"""

Language = Literal["zh", "en", "mixed"]


@cache
def _jieba():
    """Import and load jieba once, without its start-up chatter on stderr."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def warm_up() -> None:
    """Load the jieba dictionary now (about a second) instead of on the first request."""
    _jieba()


def _cjk_words(run: str) -> list[tuple[str, bool]]:
    """Segment one run of Chinese characters: (word, is_whole) pairs.

    Precise mode (`lcut`) gives the whole words. A word of 3+ characters also emits its
    dictionary halves (`配置文件` -> `配置`, `文件`; `服务器` -> `服务`), so "改配置" reaches a fact
    about "配置文件" and "服务" one about "服务器". Why not jieba's search mode
    (`lcut_for_search`): it also emits overlapping middles (`据库` from `数据库`, `口号` from
    `端口号`), which are noise. BM25 R@5 on `evaldata`: xquad-r-zh2zh 0.905 precise, 0.907 search
    mode, 0.911 with halves; cmrc2018-trial 0.987 / 0.988 / 0.987.
    """
    out: list[tuple[str, bool]] = []
    for word in _jieba().lcut(run):
        out.append((word, True))
        if len(word) >= 3:
            out.extend((half, False) for half in _best_split(word) if len(half) >= 2)
    return out


def _best_split(word: str) -> tuple[str, ...]:
    """Dictionary halves of a compound.

    Three characters: the two-character head if it is a word (`服务器` -> `服务`, `端口号` ->
    `端口`), because technical compounds are mostly modifier + one-character suffix (器 库 号 机
    表 码); frequency alone would pick `口号` (slogan). Longer words: the split into two halves of
    2+ characters whose dictionary frequencies have the largest product.
    """
    freq = _jieba().get_FREQ
    if len(word) == 3:
        for half in (word[:2], word[1:]):
            if freq(half):
                return (half,)
        return ()
    best: tuple[str, ...] = ()
    best_score = 0
    for i in range(2, len(word) - 1):
        left, right = word[:i], word[i:]
        score = (freq(left) or 0) * (freq(right) or 0)
        if score > best_score:
            best, best_score = (left, right), score
    return best


def _pieces(text: str) -> list[tuple[str, str]]:
    """Ordered raw pieces in original case with a kind: "zh" whole word, "zh-sub", "other"."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    out: list[tuple[str, str]] = []
    for m in _RUN.finditer(text):
        cjk, other = m.group(1), m.group(2)
        if cjk:
            out.extend((w, "zh" if whole else "zh-sub") for w, whole in _cjk_words(cjk))
            continue
        for raw in _HARD_SPLIT.split(other):
            piece = _clean_piece(raw)
            if piece:
                out.append((piece, "other"))
    return out


def _clean_piece(raw: str) -> str:
    """Trim punctuation from the edges of a piece, keeping path and dotfile prefixes."""
    if _KEEP_WHOLE_SYMBOLIC.match(raw):
        return raw
    raw = raw.lstrip("-:@+#'")
    m = _LEADING_PATH.match(raw)
    prefix = m.group(0) if m else ""
    body = raw[len(prefix) :].strip(_EDGE_STRIP)
    if not body or not any(c.isalnum() for c in body):
        return ""
    if "'" in body:
        body = _uncontract(body)
    return prefix + body


def _uncontract(word: str) -> str:
    """`user's` -> `user`, `we'll` -> `we`; `don't` stays whole so negation is not lost."""
    if word.lower().endswith("n't"):
        return word
    m = _CONTRACTION.match(word)
    if m:
        return m.group(1)
    return word.replace("'", "")


def _parts(piece: str) -> list[str]:
    """Segments and atoms of a compound identifier, lowercased, in order, without the whole."""
    if _NUMERIC.match(piece):
        return [piece[1:]] if piece[0] in "vV" else []
    if not any(c in piece for c in "./:@_-+~#") and not _HUMP.search(piece):
        return []
    segments = [s for s in _SEGMENT_SPLIT.split(piece) if s.strip(_EDGE_STRIP)]
    out: list[str] = []
    if len(segments) > 1:
        out.extend(s.strip(_EDGE_STRIP).lower() for s in segments)
    for seg in segments:
        seg = seg.strip(_EDGE_STRIP)
        if _NUMERIC.match(seg):
            continue
        for chunk in _ATOM_SPLIT.split(seg):
            atoms = _camel_atoms(chunk)
            if len(atoms) > 1:
                out.append(chunk.lower())
            out.extend(a.lower() for a in atoms if len(a) > 1 or a.isdigit())
    whole = piece.lower()
    seen = {whole}
    uniq = []
    for p in out:
        if p and p not in seen:
            seen.add(p)
            uniq.append(p)
    return uniq


def _camel_atoms(chunk: str) -> list[str]:
    """`getHTTPResponse` -> get, HTTP, Response; `IPv6`, `iPhone`, `OAuth` stay whole.

    A split that leaves a one-letter atom is a brand spelling, not two words.
    """
    if not _HUMP.search(chunk):
        return [chunk]
    atoms = _CAMEL.findall(chunk)
    if any(len(a) < 2 and not a.isdigit() for a in atoms):
        return [chunk]
    return atoms


def _is_stop(token: str) -> bool:
    return token in STOPWORDS or token.endswith("n't")


def words(text: str) -> list[str]:
    """Whole tokens in order, lowercased, stopwords and negations KEPT, no identifier parts.

    For callers that need word order or function words (claims reads negations and their scope
    here). Retrieval uses `tokenize`.
    """
    return [p.lower() for p, kind in _pieces(text) if kind != "zh-sub"]


def tokenize(text: str) -> list[str]:
    """Index/query tokens: whole tokens plus identifier parts, minus stopwords, in text order."""
    out: list[str] = []
    for piece, kind in _pieces(text):
        whole = piece.lower()
        if not _is_stop(whole):
            out.append(whole)
        if kind == "other":
            out.extend(p for p in _parts(piece) if not _is_stop(p))
    return out


def content_words(text: str) -> set[str]:
    """The set of `tokenize` tokens: what "sharing a content word" means in evals and claims."""
    return set(tokenize(text))


def cjk_share(text: str) -> float:
    """Share of Chinese in `text`, counting each CJK character and each Latin word as one unit.

    Why words and not letters: one English word carries about as much as one or two Chinese
    characters, so counting letters would call "部署到 api.example.com" English.
    """
    cjk = len(_CJK_CHAR.findall(text))
    latin = len(_LATIN_WORD.findall(unicodedata.normalize("NFKC", text)))
    total = cjk + latin
    return cjk / total if total else 0.0


def language(text: str) -> Language:
    """"zh" if at least 80% Chinese units, "en" if at most 20%, otherwise "mixed".

    Text without letters (a bare number, an error code's digits, empty text) is "mixed": it is
    language-neutral, and for fusion "mixed" means the lexical leg may still match either side.
    """
    if not _CJK_CHAR.search(text) and not _LATIN_WORD.search(text):
        return "mixed"
    share = cjk_share(text)
    if share >= 0.8:
        return "zh"
    if share <= 0.2:
        return "en"
    return "mixed"
