"""gitleaks' rules that Kingfisher's catalog lacks, with gitleaks' own filters.

Kingfisher's built-in catalog is Betterleaks, which follows gitleaks rule for rule, except for
``generic-api-key`` (the named ``key = value`` rule: any name holding access/auth/api/
credential/key/password/secret/token, a separator, a value of 10+ characters) and four
keyword-context rules. ``data/gitleaks-extra.toml`` holds those blocks verbatim (MIT; commit
and refresh command in its header). Kingfisher compiles their regexes into the same Vectorscan
database as its own rules (one scan, about 1 s more compile on a cold cache), but reads only the
regex of a TOML rule, so what gitleaks does after a match is done here, as gitleaks does it
(``detect/detect.go``): the secret is the first non-empty group; a secret whose Shannon entropy
is at or below the rule's ``entropy`` is dropped; so is one that an allowlist accepts (its
``regexes`` searched in the secret, the whole match or the line, per ``regexTarget``; its
``stopwords`` contained in the lowercased secret; OR unless ``condition = "AND"``).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

PREFIX = "custom."  # Kingfisher's id prefix for rules loaded from a file

_POSIX = {
    "[:alnum:]": "A-Za-z0-9",
    "[:alpha:]": "A-Za-z",
    "[:digit:]": "0-9",
    "[:upper:]": "A-Z",
    "[:lower:]": "a-z",
    "[:space:]": r"\s",
    "[:xdigit:]": "0-9A-Fa-f",
    "[:word:]": r"\w",
}


def path() -> Path:
    return Path(str(files("factbank") / "data" / "gitleaks-extra.toml"))


def go_regex_source(pattern: str) -> str:
    """A Go RE2 pattern's POSIX classes and ``\\z`` in Python's syntax, as text.

    Public because the secrets eval's corpus builder translates gitleaks' whole catalog the
    same way (it adds ``[:punct:]`` and moves an inner ``(?i)`` itself): one translation keeps
    the corpus's samples matching what the product compiles."""
    for k, v in _POSIX.items():
        pattern = pattern.replace(k, v)
    return pattern.replace(r"\z", r"\Z")


def _python_regex(pattern: str) -> re.Pattern[str]:
    """Go RE2 syntax as Python's: POSIX classes, ``\\z``, a global ``(?i)`` not at the start."""
    pattern = go_regex_source(pattern)
    if pattern.startswith("(?i)"):
        return re.compile(pattern[4:], re.IGNORECASE)
    return re.compile(pattern)


@dataclass(frozen=True)
class _Allowlist:
    target: str  # secret | match | line
    regexes: tuple[re.Pattern[str], ...]
    stopwords: tuple[str, ...]
    all_of: bool
    paths: bool  # has path conditions; a stored string has no path

    def allows(self, secret: str, match: str, line: str) -> bool:
        if self.all_of and self.paths:
            return False  # "path AND ...": the path part can never hold here
        target = {"match": match, "line": line}.get(self.target, secret)
        by_regex = any(r.search(target) for r in self.regexes) if target else False
        low = secret.lower()
        by_word = any(w in low for w in self.stopwords)
        if self.all_of:
            checks = ([by_regex] if self.regexes else []) + ([by_word] if self.stopwords else [])
            return bool(checks) and all(checks)
        return by_regex or by_word


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    entropy: float
    allowlists: tuple[_Allowlist, ...]


@cache
def _rules() -> dict[str, _Rule]:
    data = tomllib.loads(path().read_text(encoding="utf-8"))
    out = {}
    for rule in data.get("rules", []):
        allowlists = tuple(
            _Allowlist(
                target=a.get("regexTarget", "secret"),
                regexes=tuple(_python_regex(r) for r in a.get("regexes", [])),
                stopwords=tuple(w.lower() for w in a.get("stopwords", [])),
                all_of=a.get("condition", "OR").upper() == "AND",
                paths=bool(a.get("paths")),
            )
            for a in rule.get("allowlists", [])
        )
        out[PREFIX + rule["id"]] = _Rule(
            _python_regex(rule["regex"]), float(rule.get("entropy", 0.0)), allowlists
        )
    return out


def warm_up() -> None:
    _rules()


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def kept(rule_id: str, text: str, start: int, end: int) -> bool:
    """Whether gitleaks would report the secret ``text[start:end]`` that Kingfisher found
    with ``rule_id``; rules that are not ours are always kept."""
    rule = _rules().get(rule_id)
    if rule is None:
        return True
    secret = text[start:end]
    if rule.entropy and _entropy(secret) <= rule.entropy:
        return False
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line = text[line_start : len(text) if line_end < 0 else line_end]
    whole = match(rule_id, text, start, end) or secret
    return not any(a.allows(secret, whole, line) for a in rule.allowlists)


def match(rule_id: str, text: str, start: int, end: int) -> str | None:
    """The whole match of one of these rules whose secret is ``text[start:end]``."""
    rule = _rules().get(rule_id)
    return _match_around(rule.regex, text, start, end) if rule else None


def _match_around(regex: re.Pattern[str], text: str, start: int, end: int) -> str | None:
    """The whole regex match whose secret group is ``text[start:end]`` (Kingfisher reports the
    group's span only; ``regexTarget = "match"`` allowlists test the whole match, which may
    span lines). Searched from 256 characters before the secret: the regex's name and
    separator parts are shorter, so a long text costs no more."""
    for m in regex.finditer(text, max(0, start - 256), min(len(text), end + 8)):
        groups = [g for g in range(1, (m.lastindex or 0) + 1) if m.group(g)]
        if groups and m.span(groups[0]) == (start, end):
            return m.group()
        if m.start() > start:
            break
    return None
