"""The agent-memory set's writer questions (docs/principles.md#the-writer-asks-the-questions): one
line per fact, two English and
two Chinese questions each, within the API's limits, and the eval's four save configurations
carry exactly what they say."""

from __future__ import annotations

import json
import re

from factbank.write.gate import MAX_QUESTION_CHARS, MAX_QUESTIONS
from factbank_evals import agent_memory as am

CJK = re.compile(r"[\u3400-\u9fff]")


def _questions() -> dict[str, list[str]]:
    rows = [json.loads(x) for x in (am.SET_DIR / "questions.jsonl").read_text().splitlines()]
    return {r["id"]: r["questions"] for r in rows}


def test_every_fact_has_two_english_and_two_chinese_questions():
    facts = am.read_jsonl(am.SET_DIR / "facts.jsonl")
    questions = _questions()
    assert list(questions) == [f["id"] for f in facts]
    for fid, qs in questions.items():
        assert len(qs) == 4 <= MAX_QUESTIONS, fid
        assert sum(bool(CJK.search(q)) for q in qs) == 2, fid
        assert all(0 < len(q) <= MAX_QUESTION_CHARS and "\n" not in q for q in qs), fid
        assert len({q.casefold() for q in qs}) == 4, fid


def test_the_save_configurations_keep_or_drop_tags_and_questions():
    for config, (tags, questions) in am.CONFIGS.items():
        facts, cases = am.load_set(am.SET_DIR, config)
        assert cases
        assert all(bool(f["tags"]) == tags for f in facts), config
        assert all(bool(f["questions"]) == questions for f in facts), config
        body = am._body(facts[0])
        assert body["questions"] == facts[0]["questions"]
