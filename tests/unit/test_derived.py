"""The pure parts of staleness on the server: a derived fact's citations in the gate, the gate's
fingerprint rule, the session block's stale lines within their budget, and the rule gate's
"unrelated" test and claim grouping."""

from __future__ import annotations

import re

import pytest

from factbank.errors import Refused
from factbank.models import Fingerprint, NewFact, Source
from factbank.read import inject
from factbank.staleness import rules
from factbank.write import gate


def new(kind: str = "fact", location: str = "#12, #15", quote: str = "port 8080", **over):
    return NewFact(content="Health checks probe port 8080", category="project",
                   source=Source(kind=kind, location=location), quote=quote, **over)


@pytest.mark.parametrize(
    ("location", "ids"),
    [("#12, #15", [12, 15]), ("12 15", [12, 15]), ("#12,#12;#3", [12, 3]), ("#7", [7]),
     ("", None), ("#12, deploy.yaml", None), ("#", None), ("#1234567890123456789", None)],
)
def test_cited_ids(location, ids):
    assert gate.cited_ids(location) == ids


def test_a_fact_source_is_normalised_and_bounded():
    p = gate.check(new(location=" 15  #12 "), max_chars=1000, policy="redact")
    assert p.source_location == "#15, #12" and p.cites == [15, 12]
    with pytest.raises(Refused) as exc:
        gate.check(new(location="deploy/api.yaml:12"), max_chars=1000, policy="redact")
    assert exc.value.field == "source.location"
    many = ", ".join(f"#{i}" for i in range(1, gate.MAX_CITES + 2))
    with pytest.raises(Refused, match="limit is 20"):
        gate.check(new(location=many), max_chars=1000, policy="redact")


def test_check_citations():
    p = gate.check(new(), max_chars=1000, policy="redact")
    ok = {12: ("active", "The API listens on  port 8080"), 15: ("stale", "other")}
    assert gate.check_citations(p, ok) == []  # whitespace normalised; a stale source counts
    assert [r["field"] for r in gate.check_citations(p, {12: ok[12]})] == ["source.location"]
    gone = {12: ("superseded", ok[12][1]), 15: ("deleted", "x")}
    reasons = gate.check_citations(p, gone)
    assert [r["reason"] for r in reasons] == ["cites #12, which is superseded",
                                              "cites #15, which is deleted"]
    other = {12: ("active", "The API listens on port 9090"), 15: ("active", "Port 8081")}
    assert [r["field"] for r in gate.check_citations(p, other)] == ["quote"]
    # Verbatim: case matters.
    upper = {12: ("active", "PORT 8080"), 15: ("active", "x")}
    assert [r["field"] for r in gate.check_citations(p, upper)] == ["quote"]


def test_a_fingerprint_belongs_to_a_file_or_commit_source_and_its_path_is_redacted():
    fp = Fingerprint(quote_sha256="0" * 64, path="deploy/AKIAQ7R2X9KD4M3ZTB5W.yaml", line=3)
    p = gate.check(new("file", "deploy/api.yaml:3", fingerprint=fp), max_chars=1000,
                   policy="redact")
    assert p.fingerprint is not None and "AKIA" not in p.fingerprint.path
    assert p.fingerprint.line == 3 and p.fingerprint.quote_sha256 == "0" * 64
    with pytest.raises(Refused) as exc:
        gate.check(new("user", "", fingerprint=fp), max_chars=1000, policy="redact")
    assert exc.value.field == "fingerprint"


def _rows(n: int, status: str = "stale") -> list[dict]:
    return [{"id": i, "status": status, "stale_reason": f"the quote is gone from f{i}.yaml:3",
             "review_reason": f"cites #{i - 1}, which turned stale"} for i in range(1, n + 1)]


@pytest.mark.parametrize("budget", [200, 100, 60, 40])
def test_stale_lines_stay_inside_their_budget_and_name_what_they_can(budget):
    text = inject.stale_lines(_rows(20), budget)
    assert inject.estimate_tokens(text) <= budget
    assert text.startswith(inject.STALE_HEADER) and "#1 stale: the quote is gone" in text
    named = {int(i) for i in re.findall(r"#(\d+)\b", text)}
    more = re.search(r"\(\+(\d+) more\)$|^- (\d+) more$", text, re.MULTILINE)
    counted = int(more.group(1) or more.group(2)) if more else 0
    assert len(named) + counted == 20 and named == set(range(1, len(named) + 1))


def test_stale_lines_without_room_or_rows_are_empty():
    assert inject.stale_lines([], 200) == ""
    assert inject.stale_lines(_rows(3), 10) == ""  # not even the header fits
    review = inject.stale_lines(_rows(1, status="active"), 200)
    assert "#1 under review: cites #0" in review
    long = [{"id": 1, "status": "stale", "stale_reason": "word " * 100, "review_reason": None}]
    line = inject.stale_lines(long, 200).splitlines()[1]
    assert len(line) < inject.STALE_REASON_CHARS + 20 and line.endswith("…")


def test_unrelated_projects():
    assert rules.unrelated({"a": {"a"}, "b": {"b"}})
    assert not rules.unrelated({"a": {"a", "m"}, "b": {"b", "m"}})  # a shared remote
    assert not rules.unrelated({"a": {"a"}, "fork": {"fork", "a"}})  # the fork's upstream
    assert not rules.unrelated({"a": {"a"}})
    assert rules.unrelated({"a": {"a", "m"}, "b": {"b", "m"}, "c": {"c"}})
