"""Does a user's prompt correct the agent? ("no, we use pnpm", "不对，应该是 8081", "actually
the staging host is ...") -- the prompt hook's detector (docs/misses.md).

When it fires, the hook adds ONE line to the agent's context: save the user's words as a fact
(quoting them), or supersede the fact the bank holds on the subject, named. Nothing is saved by
the hook: the write gate stays the only way in (principle 1).

Why word lists and string tests, not a model and not regular expressions: it runs in the
prompt hook, a fresh process at every prompt, whose whole budget is ~100 ms
(docs/harnesses.md). A first version with two dozen regular expressions spent 10-18 ms
compiling them in each new process (the module is imported and run fresh at every prompt);
these tests cost ~9 µs a prompt, 0.56 ms with the import in a fresh process. Measured on the
labelled set (evals/sets/corrections, `factbank eval corrections`): precision 0.96 and recall
0.90 on the 60 held-out prompts (0.99 / 0.97 on all 319); docs/misses.md has the rest.

The shape of a correction: a corrective opener ("no", "wrong", "actually", "不对", "错了",
"其实") followed by a statement (not a request or a question: "no, can you try again?",
"actually, can you add a test", "不知道为什么..." are not), or a contrast anywhere ("X, not
Y", "不是 X，是 Y", "we switched to", "改成", "I told you", "我说过").
"""

from __future__ import annotations

HEAD = 400  # corrections say it at once; a pasted log after it is not read

# Openers: the prompt starts with one of these (then a word boundary). Longest first.
EN_OPENERS = tuple(sorted((
    "no", "nope", "nah", "wrong", "incorrect", "not quite", "not true", "not really",
    "correction", "wait, no", "wait no", "hm, no", "hmm, no", "hmm no", "hm no", "no no",
    "no no no", "actually", "that's wrong", "that is wrong", "that's not right",
    "that is not right", "that's incorrect", "that is incorrect", "that's not correct",
    "that's outdated", "that is outdated", "that's not how we do it", "that's the old",
    "this is wrong", "it's wrong", "you're wrong", "you are wrong", "you're mistaken",
), key=len, reverse=True))
# After "no" or "wrong" without punctuation, only these start a statement ("no we use ...";
# "No module named", "no tests ran", "wrong number of arguments" do not).
STATEMENT_WORDS = frozenset((
    "we", "it", "it's", "its", "that's", "this", "the", "you", "use", "they", "our", "i",
    "that", "we're", "they're", "main", "prod", "production", "staging",
))
# What follows an opener in a request, a question or a thank-you, not a correction.
REQUEST_WORDS = frozenset((
    "can", "could", "would", "will", "do", "does", "did", "is", "are", "was", "shall", "may",
    "might", "please", "let's", "lets", "let", "try", "go", "thanks", "thank", "worries",
    "problem", "rush", "idea", "changes", "output", "wait", "never", "what", "how", "why",
    "where", "when", "which", "who", "nothing", "module", "such", "sure", "bad", "now",
    "yet", "should", "if", "maybe", "ok", "okay", "fine",
))
REQUEST_HEADS = ("that works", "that's fine", "that's ok", "that's right", "that's good",
                 "that's enough", "that's it", "i mean", "i don't know", "i don't want",
                 "i'm not sure", "tests ran", "not now", "not yet", "可以", "能不能", "能否")
# Anywhere in a prompt that is not a question: a contrast, a change, a reminder.
EN_PHRASES = (
    ", not ", " instead of ", " rather than ", "we don't use", "we do not use", "we never use",
    "we don't run", "we never run", "we never commit", "we don't commit", "we don't squash",
    "we no longer", "no longer ", "we switched", "we've switched", "switched to ",
    "we moved", "moved off ", "we migrated", "migrated to ", "we stopped using",
    "stopped using", "we dropped", "i told you", "i already told", "i've told you",
    "as i said", "like i said", "i said before", "is actually ", "are actually ",
    "the other way round", "the other way around", "you got the ", "you've got the ",
    "you have the wrong", "that's the wrong", "it's the wrong", "is outdated",
    "out of date", " anymore",
)
ZH_OPENERS = (
    "不对", "不是的", "不是这样", "错了", "错，", "错,", "你错了", "搞错了", "你搞错了",
    "弄错了", "你弄错了", "记错了", "你记错了", "说错了", "纠正一下", "更正", "其实",
    "实际上", "并不是", "不，", "不,", "不不", "错吧",
)
ZH_PHRASES = (
    "的不对", "应该是", "应该用", "用的是", "我们不用", "已经不用", "早就不用", "不再用",
    "换成了", "改成了", "改用了", "迁到了", "已经换成", "已经改成", "已经迁", "全部改成",
    "都改成", "升级到", "说过", "告诉过你", "讲过",
)
ZH_QUESTION_WORDS = ("吗", "什么", "怎么", "为什么", "多少", "是否", "能不能", "可不可以",
                     "能否", "要不要", "对不对", "是不是", "哪")
PUNCT = ",.!:;-–—，。！：；、 "


def _asks(text: str) -> bool:
    """Is the first sentence a question? (Its first end mark is a question mark, or it holds
    a Chinese question word; a period ends a sentence only before a space, so
    `stg-2.internal` does not.)"""
    n = len(text)
    end = n
    for i, ch in enumerate(text):
        if ch in "?？":
            return True
        if ch in "!！。\n" or (ch == "." and (i + 1 == n or text[i + 1] == " ")):
            end = i
            break
    first = text[:end]
    return any(w in first for w in ZH_QUESTION_WORDS)


def _words(text: str, n: int) -> list[str]:
    return text.replace("，", " ").replace(",", " ").split()[:n]


def _opener(low: str) -> bool:
    """Starts with a corrective opener followed by a statement."""
    for o in EN_OPENERS:
        if low.startswith(o) and (len(low) == len(o) or not low[len(o)].isalnum()):
            rest = low[len(o):]
            stripped = rest.lstrip(PUNCT)
            if not stripped:
                return False
            punctuated = (rest[:1] in PUNCT and rest[:1] != " ") or rest[:2].strip() in (
                "-", "–", "—")
            first = (_words(stripped, 1) or [""])[0]
            if o in ("no", "wrong", "nope", "nah") and not punctuated:
                # "no we use pnpm" / "wrong port. redis is ..." but not "No module named"
                if o == "wrong":
                    head = stripped.split(" ", 2)
                    return len(head) > 1 and head[0].rstrip(PUNCT) != head[0]
                return first in STATEMENT_WORDS or not first.isascii()
            if first.rstrip(PUNCT) in REQUEST_WORDS or stripped.startswith(REQUEST_HEADS):
                return False
            return True
    return False


def _contrast_start(low: str) -> bool:
    """"not X, it's Y" / "it's not X, ..." (not "not sure, ...", "it's not working, ...")."""
    for o in ("not ", "it's not ", "it is not "):
        if low.startswith(o):
            rest = low[len(o):]
            first = (_words(rest, 1) or [""])[0]
            if first in ("sure", "now", "yet", "bad", "clear") or first.endswith("ing"):
                return False
            return any(c in rest[:60] for c in (",", "，", " - ", " – "))
    return False


def is_correction(prompt: str) -> bool:
    """True when `prompt` reads as the user correcting the agent."""
    text = prompt.strip()[:HEAD]
    low = text.lower().replace("\u2019", "'").replace("不对不对", "不对")
    while low[:1] and not (low[:1].isalnum() or low[:1] == "`"):
        low = low[1:]
    if _asks(low):
        # A question is not a correction: "no, can you try another way?", "端口是多少？".
        return False
    if _opener(low) or _contrast_start(low):
        return True
    if low.startswith(ZH_OPENERS):
        return True
    if any(p in low for p in EN_PHRASES) and not any(
            p in low for p in (", not sure", ", not yet", ", not now")):
        return True
    if "should be " in low:  # "it should be 8081": a value, not "should be fine"
        value = (_words(low.split("should be ", 1)[1], 1) or [""])[0]
        if any(c.isdigit() or c in "./:_" for c in value):
            return True
    if any(p in low for p in ZH_PHRASES):
        return True
    if "不是" in low:  # 不是 X，(...)是 Y
        at = low.index("不是")
        comma = min((low.find(c, at) for c in "，," if low.find(c, at) > 0), default=-1)
        after = low[comma:comma + 14]
        if 0 < comma - at <= 32 and any(w in after for w in ("是", "用", "it's", " is ")):
            return True
    return False


def nudge(subject: int | None) -> str:
    """The one line the prompt hook adds when a correction is recognised."""
    if subject is not None:
        return (f"[factbank] The user is correcting you. If this is a durable fact, supersede "
                f"fact #{subject} if it is the one on this subject (else save a new fact), "
                "quoting the user's words as the source (source: user said).")
    return ("[factbank] The user is correcting you. If this is a durable fact, save it with "
            "factbank, quoting the user's words as the source (source: user said).")
