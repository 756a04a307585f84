"""The write gate (docs/principles.md#write-gate): what a fact must carry to enter a bank, checked
before
anything is stored or embedded, with secrets redacted first (docs/principles.md#secrets-never-land).

A fact is one atomic claim with a category from the bank's registry, a source (kind plus a
location) and a verbatim quote from that source. Text that looks like a pasted conversation or
a log dump is refused with the reason: memory that ingests transcripts spreads their errors.

A derived fact (source kind `fact`) cites other facts of the bank: its location lists
their ids ("#12, #15"), each must exist and still hold (not deleted, not superseded), and the
quote must be verbatim (whitespace normalised) from one cited fact's content. `check` parses
the ids; `check_citations` decides on the cited rows the caller read (the gate itself never
touches the database). A fingerprint (what the client saw of a file or commit source) is only
for `file` and `commit` sources; its path is redacted with the fact's other fields.

A file source may name a symbol, `src/net.py::RetryPolicy.backoff` (docs/staleness.md#symbol-
anchors): the gate checks its shape and language (`schema.symbol_problem`, the client's check
too) and that a fingerprint names the same symbol; the client found the symbol and the quote in
it, since only it has the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from factbank.errors import Refused, reason
from factbank.models import Fingerprint, NewFact
from factbank.redact import redaction
from factbank.store import facts
from factbank_common.schema import split_symbol, symbol_problem

MAX_QUOTE_CHARS = 2000
MAX_TAGS = 12
# How many tags a request may send before de-duplication (repeats are dropped, so a few more
# than MAX_TAGS are forgiven); more is refused before any per-tag work.
MAX_TAGS_SENT = 4 * MAX_TAGS
MAX_TAG_CHARS = 40
MAX_PROJECT_CHARS = 200
MAX_LOCATION_CHARS = 500
MAX_CONTENT_LINES = 4
# Writer questions (docs/principles.md#the-writer-asks-the-questions): two to four are asked for;
# six leaves room for aliases.
MAX_QUESTIONS = 6
MAX_QUESTION_CHARS = 200
# A derived fact cites at most this many facts (the review cascade walks them).
MAX_CITES = 20
FINGERPRINTED = ("file", "commit")

_SPEAKER = re.compile(
    r"^\s*(user|assistant|human|ai|system|claude|codex|gpt|me|you|q|a|用户|助手|我|你)\s*[:：>]",
    re.IGNORECASE | re.MULTILINE,
)
_LOG_LINE = re.compile(
    r"^\s*(\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\[?\d{2}:\d{2}:\d{2}|"
    r"(DEBUG|INFO|WARN|WARNING|ERROR|FATAL|TRACE)\b[\s:\]]|"
    r"at [\w.$]+\(|File \".*\", line \d+|Traceback \(most recent call last\))",
    re.MULTILINE,
)
_SHA = re.compile(r"^[0-9a-f]{7,40}$", re.IGNORECASE)
_URL = re.compile(r"^https?://\S+$", re.IGNORECASE)
_CITATION = re.compile(r"^#?(\d{1,18})$")
CATEGORY_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")  # the database's rule for a name
# Fields the gate redacts besides the fact's own: echoed or stored, but not part of the claim.
# Under the `reject` policy each is refused by its own name (the fact's own fields by
# "content", as always).
_CALLER_FIELDS = ("project", "agent", "X-Factbank-Agent", "category", "restore.supersede_reason")


@dataclass
class Prepared:
    """A fact that passed the gate: normalised and redacted, ready to store."""

    content: str
    category: str
    tags: list[str]
    source_kind: str
    source_location: str
    quote: str
    project: str | None
    origin: str
    tentative: bool
    agent: str
    redacted: list[redaction.Finding] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    fingerprint: Fingerprint | None = None
    cites: list[int] = field(default_factory=list)  # source kind `fact`: the cited ids
    content_hash: bytes = b""  # `facts.content_hash` of the content, computed here once
    restore_reason: str | None = None  # an imported line's `restore.supersede_reason`, redacted


def _dump_reason(text: str, what: str) -> str | None:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(_SPEAKER.findall(text)) >= 2:
        return f"{what} looks like a pasted conversation; save the one fact it established"
    if len(_LOG_LINE.findall(text)) >= 3:
        return f"{what} looks like a log dump; save the error and its cause, quote one line"
    if what == "content" and len(lines) > MAX_CONTENT_LINES:
        return (
            f"content has {len(lines)} lines; a fact is one atomic claim (at most "
            f"{MAX_CONTENT_LINES} lines)"
        )
    return None


def cited_ids(location: str) -> list[int] | None:
    """The fact ids a `fact` source lists ("#12, #15" or "12 15"), in order, each once; None
    when the location is not such a list."""
    parts = [p for p in re.split(r"[\s,;]+", location) if p]
    ids = [int(m.group(1)) if (m := _CITATION.match(p)) else None for p in parts]
    if not ids or None in ids:
        return None
    return list(dict.fromkeys(i for i in ids if i is not None))


def check_source(kind: str, location: str) -> str | None:
    """Why a location does not fit its source kind (None: it does)."""
    if kind == "fact":
        ids = cited_ids(location)
        if ids is None:
            return "source kind 'fact' needs the cited fact ids as its location, e.g. '#12, #15'"
        if len(ids) > MAX_CITES:
            return f"a derived fact cites {len(ids)} facts; the limit is {MAX_CITES}"
        return None
    if kind == "file" and (why := symbol_problem(location)):
        return why
    if kind in ("file", "doc", "command") and not location:
        hint = {
            "file": "a path, e.g. src/app.py:42",
            "doc": "a document name or path",
            "command": "the command that was run",
        }[kind]
        return f"source kind '{kind}' needs a location: {hint}"
    if kind == "url" and not _URL.match(location):
        return "source kind 'url' needs an http(s) URL as its location"
    if kind == "commit" and not any(_SHA.match(p) for p in re.split(r"[\s@:#]+", location)):
        return "source kind 'commit' needs a commit SHA (7-40 hex digits) in its location"
    return None


def symbol_fingerprint_reasons(
    kind: str, location: str, fp: Fingerprint, field: str = "fingerprint"
) -> list[dict[str, str]]:
    """Why a fingerprint does not fit its source's symbol (empty: it does). A symbol source's
    fingerprint names that symbol and carries its digest; any other source's names none."""
    parts = split_symbol(location) if kind == "file" else None
    if not fp.symbol and not fp.symbol_sha256:
        if parts is not None:
            return [
                reason(
                    f"{field}.symbol",
                    f"a symbol source's fingerprint names its symbol ({parts[1]}) and its "
                    "digest (symbol_sha256)",
                )
            ]
        return []
    if parts is None:
        return [
            reason(
                f"{field}.symbol",
                "a fingerprint names a symbol only for a symbol source (path::Qualified.name)",
            )
        ]
    if fp.symbol != parts[1]:
        return [
            reason(
                f"{field}.symbol",
                f"the fingerprint is of {fp.symbol!r}, the source names {parts[1]!r}",
            )
        ]
    if not fp.symbol_sha256:
        return [reason(f"{field}.symbol_sha256", "a symbol fingerprint needs the symbol's digest")]
    return []


def _distinct_lines(items: list[str], field: str, noun: str, max_chars: int, hint: str,
                    reasons: list[dict[str, str]]) -> list[str]:
    """Each item's whitespace collapsed, empty ones dropped, one too long refused (its index
    in `field`), case-insensitive repeats dropped (first kept). Why shared: tags and writer
    questions must be normalised and refused alike, or one list would keep what the other
    drops."""
    out: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        item = " ".join(item.split())
        if not item:
            continue
        if len(item) > max_chars:
            reasons.append(reason(f"{field}[{i}]", f"{noun} is {len(item)} characters; the "
                                  f"limit is {max_chars}{hint}"))
            continue
        if item.casefold() not in seen:
            seen.add(item.casefold())
            out.append(item)
    return out


def _clean_tags(tags: list[str], reasons: list[dict[str, str]]) -> list[str]:
    """Whitespace-normalised tags, de-duplicated case-insensitively in one pass (a set)."""
    if len(tags) > MAX_TAGS_SENT:
        reasons.append(reason("tags", f"{len(tags)} tags sent; the limit is {MAX_TAGS}"))
        return []
    out = _distinct_lines(tags, "tags", "tag", MAX_TAG_CHARS, "", reasons)
    if len(out) > MAX_TAGS:
        reasons.append(reason("tags", f"{len(out)} tags; the limit is {MAX_TAGS}"))
    return out


def clean_questions(questions: list[str], reasons: list[dict[str, str]]) -> list[str]:
    """Whitespace-normalised, de-duplicated (case-insensitively), bounded questions."""
    if len(questions) > MAX_QUESTIONS:
        reasons.append(
            reason(
                "questions",
                f"{len(questions)} questions; the limit is {MAX_QUESTIONS} "
                "(two to four, in English and Chinese, are enough)",
            )
        )
        return []
    return _distinct_lines(questions, "questions", "question", MAX_QUESTION_CHARS,
                           ": one short question a teammate would type", reasons)


def _text_reason(text: str, field: str, empty: str, max_chars: int, hint: str) -> str | None:
    """Why a fact's content or quote is refused: empty, too long, or a dump (`_dump_reason`);
    None or "" when it passes. Why shared: both fields are the fact's text and must be
    refused by the same rules, in the same order."""
    if not text:
        return empty
    if len(text) > max_chars:
        return f"{field} is {len(text)} characters; the limit is {max_chars}: {hint}"
    return _dump_reason(text, field)


def check(new: NewFact, *, max_chars: int, policy: str, agent: str = "") -> Prepared:
    """Validate and redact one fact; raise `Refused` listing every problem found.

    The one redaction of a write: the fact's fields, and with them everything the request
    adds that is stored or echoed -- its project, agent, the X-Factbank-Agent header (`agent`)
    and a category that is not a valid name (an "unknown category" refusal echoes it), in ONE
    `redact_fields` call. The store's two doors (`facts.record_event`, `audit.append`) redact
    again what they write, whoever calls them; nothing else on the way does."""
    reasons: list[dict[str, str]] = []
    content = new.content.strip()
    quote = new.quote.strip()
    location = new.source.location.strip()
    if why := _text_reason(content, "content", "content is empty", max_chars,
                           "save one atomic claim"):
        reasons.append(reason("content", why))
    if why := _text_reason(quote, "quote", "a verbatim quote from the source is required"
                           + (" (the user's own words)" if new.source.kind == "user" else ""),
                           MAX_QUOTE_CHARS, "quote the lines that show the fact"):
        reasons.append(reason("quote", why))
    if len(location) > MAX_LOCATION_CHARS:
        reasons.append(
            reason("source.location", f"location is longer than {MAX_LOCATION_CHARS} characters")
        )
    elif why := check_source(new.source.kind, location):
        reasons.append(reason("source.location", why))
    project = (new.project or "").strip() or None
    if project and len(project) > MAX_PROJECT_CHARS:
        reasons.append(
            reason("project", f"project key is longer than {MAX_PROJECT_CHARS} characters")
        )
    tags = _clean_tags(new.tags, reasons)
    questions = clean_questions(new.questions, reasons)
    if new.fingerprint is not None and new.source.kind not in FINGERPRINTED:
        reasons.append(
            reason(
                "fingerprint",
                f"a fingerprint is for file and commit sources, not '{new.source.kind}'",
            )
        )
    elif new.fingerprint is not None:
        reasons.extend(symbol_fingerprint_reasons(new.source.kind, location, new.fingerprint))
    if reasons:
        raise Refused(reasons)
    cites: list[int] = []
    if new.source.kind == "fact":
        cites = cited_ids(location) or []
        location = ", ".join(f"#{i}" for i in cites)

    fp_path = new.fingerprint.path.strip() if new.fingerprint is not None else None
    restore = getattr(new, "restore", None)  # an import line: an exported fact's state
    clean, findings = redaction.redact_fields(
        {
            "content": content,
            "quote": quote,
            "source": location,
            "tags": tags,
            "questions": questions,
            "fingerprint.path": fp_path,
            "fingerprint.symbol": new.fingerprint.symbol or None if new.fingerprint else None,
            "project": project,
            "agent": new.agent,
            "X-Factbank-Agent": agent,
            "category": None if CATEGORY_NAME.match(new.category) else new.category,
            "restore.supersede_reason": restore.supersede_reason if restore is not None else None,
        }
    )
    if findings and policy == "reject":
        own = [f for f in findings if f.field not in _CALLER_FIELDS]
        refusals = [
            reason(f.field, f"this bank rejects secrets; {f.field} holds one ({f.kind})")
            for f in findings
            if f.field in _CALLER_FIELDS
        ]
        if own:
            kinds = sorted({f"{f.field}: {f.kind}" for f in own})
            refusals.insert(0, reason(
                "content", "this bank rejects facts containing secrets; found " + ", ".join(kinds)
            ))
        raise Refused(refusals)
    content = str(clean["content"])
    return Prepared(
        content=content,
        category=str(clean["category"] or new.category),
        tags=list(clean["tags"] or []),
        source_kind=new.source.kind,
        source_location=str(clean["source"]),
        quote=str(clean["quote"]),
        project=clean["project"],  # type: ignore[arg-type]
        origin=new.origin,
        tentative=new.tentative,
        agent=str(clean["agent"] or clean["X-Factbank-Agent"] or "")[:64],
        redacted=findings,
        questions=list(clean["questions"] or []),
        fingerprint=None
        if new.fingerprint is None
        else msgspec.structs.replace(
            new.fingerprint,
            path=str(clean["fingerprint.path"]),
            symbol=clean["fingerprint.symbol"] or msgspec.UNSET,
        ),
        cites=cites,
        content_hash=facts.content_hash(content),
        restore_reason=clean["restore.supersede_reason"],  # type: ignore[arg-type]
    )


def check_citations(
    p: Prepared, cited: Mapping[int, tuple[str, str]], *, restoring: bool = False
) -> list[dict[str, str]]:
    """The refusals of a derived fact, given the rows its ids name in its bank ({id: (status,
    content)}; an id absent from the mapping is not in the bank): each cited fact must exist
    and still hold, and the quote must be verbatim from one of them. `restoring` (an import
    of an exported fact, in its exported state): a cited fact retired since still counts, as
    it did when the fact was written; it must still exist in this bank (the client maps
    exported ids to this bank's, as it does `superseded_by`)."""
    out: list[dict[str, str]] = []
    for fact_id in p.cites:
        if fact_id not in cited:
            out.append(reason("source.location", f"cites #{fact_id}: no such fact in this bank"))
        elif not restoring and cited[fact_id][0] in ("deleted", "superseded"):
            out.append(
                reason("source.location", f"cites #{fact_id}, which is {cited[fact_id][0]}")
            )
    if out:
        return out
    needle = " ".join(p.quote.split())
    if not any(needle in " ".join(cited[i][1].split()) for i in p.cites):
        out.append(
            reason(
                "quote",
                "a derived fact quotes one of the facts it cites verbatim; the quote is in "
                "none of " + ", ".join(f"#{i}" for i in p.cites),
            )
        )
    return out
