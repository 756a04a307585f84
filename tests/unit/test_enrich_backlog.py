"""The import's hint on facts without writer questions (`cli.enrich.backlog`): what it
says, and that a bank which cannot say (a token without the read scope) costs the import
nothing. The counting itself runs against the real services in test_cli's import test."""

from __future__ import annotations

from factbank_client.cli.enrich import backlog, backlog_lines
from factbank_client.errors import FactbankError


class _Bank:
    """A client whose bank answers `GET /v1/enrich` with `remaining`, or refuses it."""

    def __init__(self, remaining: int | None) -> None:
        self.remaining = remaining
        self.asked: list[dict] = []

    def enrich_batch(self, **kw) -> dict:
        self.asked.append(kw)
        if self.remaining is None:
            raise FactbankError("this token lacks the read scope", status=403, bank="team")
        return {"facts": [], "remaining": self.remaining, "bank": kw["bank"] or "personal"}


def test_the_hint_names_the_count_the_bank_and_the_command():
    client = _Bank(7)
    found = backlog(client, "team")
    assert found == {"bank": "team", "lacking_questions": 7}
    assert client.asked == [{"limit": 1, "lacking": "questions", "bank": "team"}]
    (line,) = backlog_lines(found)
    assert line.startswith("7 fact(s) in team have no writer questions")
    assert "factbank enrich --list --lacking questions --bank team" in line


def test_nothing_is_said_when_no_fact_lacks_questions_or_the_bank_cannot_say():
    assert backlog_lines(backlog(_Bank(0), None)) == []
    assert backlog(_Bank(None), "team") is None
    assert backlog_lines(None) == []
