"""Pure parts of the client library: export -> import conversion, chunking, the merge of
injection blocks, and how a server error reads."""

from __future__ import annotations

import json

from factbank_client.client import (
    chunk_lines,
    is_exported_fact,
    merge_injections,
    merge_questions,
    to_new_fact,
)
from factbank_client.errors import FactbankError

EXPORTED = {
    "id": 7, "bank": "alice", "content": "The team uses pnpm", "category": "preferences",
    "tags": ["pnpm", "包管理器"],
    "questions": ["which package manager do we use?", "装依赖用 npm 还是 pnpm？"],
    "source": {"kind": "user", "location": ""},
    "quote": "we use pnpm", "project": None, "origin": "user", "tentative": False,
    "trust": 0.9, "effective_trust": 0.9, "status": "active", "superseded_by": None,
    "supersede_reason": None, "created_by": {"member": "alice", "agent": "codex"},
    "created_at": "2026-11-29T10:00:00Z", "updated_at": "2026-11-29T10:00:00Z",
    "confirmed_at": "2026-11-29T10:00:00Z",
}


def test_exported_fact_becomes_a_new_fact():
    assert is_exported_fact(EXPORTED)
    new = to_new_fact(EXPORTED)
    assert new == {"content": "The team uses pnpm", "category": "preferences",
                   "source": {"kind": "user", "location": ""}, "quote": "we use pnpm",
                   "origin": "user", "tentative": False, "tags": ["pnpm", "包管理器"],
                   "questions": ["which package manager do we use?", "装依赖用 npm 还是 pnpm？"],
                   "agent": "codex"}
    # A NewFact passes through unchanged (and is not mistaken for an export).
    assert not is_exported_fact(new)
    assert to_new_fact(new) == new


def test_a_fact_exported_before_questions_existed_still_converts():
    old = {k: v for k, v in EXPORTED.items() if k != "questions"}
    assert "questions" not in to_new_fact(old)
    assert "questions" not in to_new_fact({**EXPORTED, "questions": None})


def test_merge_questions_adds_new_ones_after_the_old_and_skips_repeats():
    old = ["which package manager do we use?", "装依赖用 npm 还是 pnpm？"]
    assert merge_questions(old, ["Which  package manager do we use", "npm or pnpm?"]) == [
        *old, "npm or pnpm?"]
    assert merge_questions(old, ["  how to install deps \n quickly ", ""]) == [
        *old, "how to install deps quickly"]
    assert merge_questions(old, ["npm or pnpm?"], remove=["装依赖用 npm 还是 pnpm"]) == [
        old[0], "npm or pnpm?"]
    assert merge_questions([], []) == []


def test_chunks_stay_under_the_limit_and_keep_order():
    lines = [json.dumps({"n": i, "pad": "x" * 50}) for i in range(20)]
    assert chunk_lines(lines) == [lines]
    chunks = chunk_lines(lines, max_bytes=200)
    assert [x for c in chunks for x in c] == lines
    assert all(sum(len(x) + 1 for x in c) <= 200 for c in chunks)
    # A single line larger than the limit still goes (the server will judge it).
    assert chunk_lines(["y" * 500], max_bytes=100) == [["y" * 500]]


def test_merge_injections_personal_first_and_empty_blocks_dropped():
    merged = merge_injections([
        ("personal", {"text": "[factbank] A\n- #1 x", "facts": [1], "tokens": 9}),
        ("team", {"text": "", "facts": [], "tokens": 0}),
        ("other", {"text": "[factbank] B\n- #5 y", "facts": [5], "tokens": 7}),
    ])
    assert merged["text"] == "[factbank] A\n- #1 x\n\n[factbank] B\n- #5 y"
    assert merged["facts"] == [1, 5] and merged["tokens"] == 16
    assert list(merged["banks"]) == ["personal", "team", "other"]
    assert merge_injections([])["text"] == ""


def test_error_reads_as_one_line_with_reasons_not_repeated():
    err = FactbankError("refused: quote: needs a verbatim quote", status=422,
                        reasons=[{"field": "quote", "reason": "needs a verbatim quote"},
                                 {"field": "tags", "reason": "too many"}], bank="personal")
    assert str(err) == ("[personal] 422 refused: quote: needs a verbatim quote "
                        "(tags: too many)")
    batch = FactbankError("import refused", status=422, errors=[
        {"line": 2, "reasons": [{"field": "category", "reason": "unknown category 'x'"}]}])
    assert str(batch) == "422 import refused\n  line 2: category: unknown category 'x'"


def test_chunk_lines_caps_each_import_at_the_servers_line_limit():
    lines = [f'{{"n": {i}}}' for i in range(2500)]
    chunks = chunk_lines(lines)
    assert [len(c) for c in chunks] == [1000, 1000, 500]
    assert [x for c in chunks for x in c] == lines
