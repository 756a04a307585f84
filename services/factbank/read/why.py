"""What matched: one short note per injected prompt line, so the agent can judge the fact.

Near-topic questions (the subject is in the bank, the asked detail is not) cannot be refused
by any signal measured without a reader model (AUC <= 0.68, docs/retrieval.md). The agent is
that reader, if it sees WHY a fact came up: asked for the database password, it is shown the
database port fact with `matched: "which port does the database listen on?"` and can tell
the fact answers another question.

The note names, in this order:

* the writer question whose vector matched best (`Hit.match`), quoted and clipped: it is the
  question the fact answers, in the writer's words;
* otherwise the prompt's words the fact shares (its content, tags and questions, tokenised
  as the lexical leg does, so 端口 and `port` count as the index sees them), at most
  MAX_WORDS of them;
* otherwise "meaning": the dense leg matched the content itself and no word is shared.

The note is part of the line, so the prompt block's budget (inject.PROMPT_BUDGET) counts it
and a fact whose line no longer fits is skipped, never cut. What it costs in tokens per
prompt on the agent-memory eval: `python -m factbank_evals.inject_tokens`.
"""

from __future__ import annotations

from factbank.models import Hit
from factbank.text.tokenizer import tokenize
from factbank_common.inert import inert

MAX_QUESTION_CHARS = 70
MAX_WORDS = 4


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def shared_words(prompt: str, hit: Hit) -> list[str]:
    """The prompt's tokens (in prompt order, once each) that the fact's text also holds; a
    part of a token already named (数据 of 数据库, `port` of `db_port`) is not named again."""
    fact = hit.fact
    own = set(tokenize(" ".join([fact.content, *fact.tags, *fact.questions])))
    out: list[str] = []
    for token in tokenize(prompt):
        if token in own and not any(token in named for named in out):
            out.append(token)
    return out


def note(hit: Hit, prompt: str) -> str:
    """` [matched: ...]` for a prompt line ("" when nothing can be said)."""
    if hit.match and hit.match.startswith("question: "):
        question = _clip(hit.match.removeprefix("question: "), MAX_QUESTION_CHARS)
        return inert(f' [matched: "{question}"]')
    words = shared_words(prompt, hit)
    if words:
        return inert(" [matched words: " + ", ".join(words[:MAX_WORDS]) + "]")
    if hit.match == "content":
        return " [matched: meaning]"
    return ""
