"""Text from a bank cannot add structure to what the product writes.

One table of hostile strings goes through every writer that puts bank text somewhere: the
rule patch `rules propose` writes (and its commit), the session and prompt blocks the services
build and the hooks print, the conflict warnings, a dispatch's handoff, the MCP answers and
CLI lines (render.py), CLI tables and JSON. Each writer's output for a hostile string must have
exactly the lines it has for a benign one, no control or invisible character, a bounded length
and, where the output is Markdown, no HTML comment or code fence of the string's own.
"""

from __future__ import annotations

import io
import json
import subprocess
import unicodedata
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pytest

from factbank.models import Author, Fact, Hit, Source, Via
from factbank.read import inject
from factbank_client import render, rulepatch
from factbank_client.dispatch import handoff_text
from factbank_client.dispatch.store import Run
from factbank_client.hook import main as hookmain
from factbank_client.hook import record as hookrecord
from factbank_common import output
from factbank_common.inert import LIMIT, inert, inert_lines, json_inert
from tests.unit.hostile_text import HOSTILE

NOW = datetime(2026, 12, 1, tzinfo=UTC)
BENIGN = "use pnpm, never npm"
INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}


def _fact(content: str = BENIGN, **over) -> dict:
    fact = {"id": 7, "bank": "personal", "content": content, "category": "convention",
            "tags": ["t1"], "source": {"kind": "file", "location": "a.py:1"}, "quote": "q",
            "project": "github.com/acme/api", "origin": "agent", "tentative": False,
            "trust": 0.8, "effective_trust": 0.8, "status": "active", "superseded_by": None,
            "supersede_reason": None, "created_by": {"member": "ann", "agent": "claude"},
            "created_at": "2026-12-01T10:00:00+00:00", "updated_at": "2026-12-01T10:00:00",
            "confirmed_at": "2026-12-01T10:00:00+00:00", "questions": ["q?"]}
    return {**fact, **over}


def _model(s: str) -> Fact:
    return Fact(id=7, bank="b", content=s, category=s[:300], tags=[s],
                source=Source(kind="url", location="https://x.example"), quote=s, project=s,
                origin="agent", tentative=False, trust=0.9, effective_trust=0.9,
                status="active", superseded_by=None, supersede_reason=None,
                created_by=Author(member=s, agent=s), created_at=NOW, updated_at=NOW,
                confirmed_at=NOW)


def _candidate(s: str) -> dict:
    return {"fact": _fact(s), "bank": "team", "projects": [s, "github.com/globex/web"],
            "evidence": [{"project": s, "at": "2026-12-01T10:00:00", "member": s,
                          "agent": s, "fact_id": 3}]}


def _printed(fn) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        fn()
    return buf.getvalue()


# Every writer, as a function of one hostile string: what it writes.
WRITERS = {
    "rule line": lambda s: rulepatch.rule_line(_candidate(s)),
    "fact_line (MCP)": lambda s: render.fact_line(_fact(s, tags=[s], project=s)),
    "search_text (MCP)": lambda s: render.search_text({"results": [
        {"fact": _fact(s), "bank": "b", "match": f"question: {s}",
         "via": {"superseded": 3, "reason": s}}], "degraded": {}}),
    "outcome_text (MCP)": lambda s: render.outcome_text(
        {"status": "stored", "fact": _fact(s), "bank": "b", "note": s,
         "redacted": [{"kind": s, "field": s}]}, lambda n: n, "add questions"),
    "history_text (MCP)": lambda s: render.history_text({
        "bank": "b", "fact": _fact(s, project=s, supersede_reason=s),
        "events": [{"created_at": "2026-12-01", "kind": "confirm", "trust_before": 0.5,
                    "trust_after": 0.6, "member": s, "agent": s, "reason": s}],
        "supersedes": [{"id": 2, "content": s, "supersede_reason": s}]}),
    "categories_text (MCP)": lambda s: render.categories_text(
        {"b": [{"name": s, "facts": 1, "description": s}]}),
    "fact_lines (CLI)": lambda s: "\n".join(render.fact_lines(
        _fact(s, project=s, category=s, superseded_by=9, supersede_reason=s))),
    "timeline rows (CLI)": lambda s: json.dumps(render.timeline_rows(
        [{"kind": k, "at": None, "member": s, "agent": s, "machine": s, "branch": s,
          "path": s, "tool": s, "command": s, "cwd": s, "detail": s, "project": s}
         for k in ("file", "command", "session_start", "conflict")], NOW, projects=True)[0],
        ensure_ascii=False),
    "verify lines (CLI)": lambda s: "\n".join(render.verify_lines({
        "project": s, "verdicts": [{"id": 1, "verdict": "stale", "reason": s,
                                    "context": "old line\n" + s.replace("\n", " ")},
                                   {"id": 2, "verdict": "moved", "was": s, "location": s}],
        "skipped": [{"id": 3, "reason": s}], "banks": {}})),
    "rule candidates (CLI)": lambda s: "\n".join(render.rule_candidate_lines([_candidate(s)])),
    "dispatch run (CLI)": lambda s: "\n".join(render.dispatch_run_lines(
        {"id": "r1", "agent": "claude", "status": "done", "task": s, "repo": s,
         "project": s, "files": [s], "error": s, "session_id": s})),
    "dispatch events (CLI)": lambda s: "\n".join(render.dispatch_event_line(e) for e in (
        {"kind": "command", "command": s, "exit_code": 0, "text": "ok"},
        {"kind": "edit", "path": s, "text": "Edit"}, {"kind": "error", "text": s})),
    "session block line": lambda s: inject.line_for(_model(s)),
    "prompt block line (via)": lambda s: inject.line_for(
        _model(s), inject._via_note(Hit(fact=_model(s), score=0.9, relevance=0.9,
                                        via=Via(superseded=3, reason=s)))),
    "stale lines": lambda s: inject.stale_lines(
        [{"id": 4, "status": "stale", "stale_reason": s, "review_reason": None}], 1000),
    "hook output": lambda s: hookmain.context_output("SessionStart", inject.assemble(
        [(7, inject.line_for(_model(s)))], 10**6, "b").text)["hookSpecificOutput"][
        "additionalContext"],
    # An older server's block, whose line folded LF but kept CR, U+2028 and escapes: the
    # hook's own pass still makes each of its lines inert.
    "hook output (older server)": lambda s: hookmain.context_output(
        "UserPromptSubmit", "header\n- #1 " + s.replace("\n", " "))["hookSpecificOutput"][
        "additionalContext"],
    "conflict warnings": lambda s: hookrecord.conflict_text([s]),
    "dispatch handoff": lambda s: handoff_text(Run(
        id="r1", agent="claude", task=s, repo="/r", status="done", files=[s], error=s,
        summary=s)),
    "CLI table": lambda s: _printed(lambda: output.print_table([{"a": s, "b": [s]}],
                                                               ["a", "b"])),
}
MARKDOWN = {"rule line"}


@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_bank_text_is_inert_in_every_writer(writer, case):
    write = WRITERS[writer]
    benign, out = write(BENIGN), write(HOSTILE[case])
    assert out.count("\n") == benign.count("\n"), out[:500]
    bad = {f"U+{ord(c):04X}" for c in out if c != "\n" and unicodedata.category(c) in INVISIBLE}
    assert not bad, bad
    assert len(out) <= len(benign) + 12 * (LIMIT + 10)
    if writer in MARKDOWN:
        assert "<!--" not in out and "```" not in out and "<details" not in out


def test_inert_keeps_ordinary_text_and_shows_what_it_escaped():
    for text in ("a -> b, x < 3", "部署前先跑迁移。", "path/to/file.py:12", "emoji ✅", "`x`"):
        assert inert(text) == text
        assert inert(text, markdown=True) == text.replace("< 3", "< 3")
    assert inert("a\nb\rc\td") == "a\\nb\\rc d"
    assert inert("\x1b[31m") == "\\x1b[31m"
    assert inert("x\u2028y\u200b") == "x\\u2028y\\u200b"
    assert inert("x" * 50, 10) == "x" * 9 + "…"
    assert inert("<!-- factbank:end -->", markdown=True) == "&lt;!-- factbank:end -->"
    assert inert("# title", markdown=True) == "\\# title"
    assert inert_lines("a\nb\u2028c") == "a\nb\\u2028c"


def test_json_output_escapes_what_a_terminal_would_obey_and_means_the_same():
    data = {"content": "a\x7f\x9b31m\u2028\u200b\U000e0041 中文"}
    out = _printed(lambda: output.print_json(data))
    assert json.loads(out) == data
    assert all(unicodedata.category(c) not in INVISIBLE for c in out if c != "\n")
    assert "中文" in out  # people read it: not ensure_ascii
    assert json_inert('{"a": "b"}') == '{"a": "b"}'


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_rule_patch_adds_exactly_one_list_item_whatever_the_bank_says(tmp_path, case):
    """The observed attack: a confirm's `project` held newlines and a `curl | sh` line; the
    patch must add one line to AGENTS.md, and applying it must keep the file's markers."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    agents = root / "AGENTS.md"
    before = ("# Agents\n\n<!-- factbank:begin (managed) -->\nblock\n<!-- factbank:end -->\n\n"
              + rulepatch.RULE_HEADING + "\n\n- an old rule\n")
    agents.write_text(before, "utf-8")
    s = HOSTILE[case]
    cand = {"fact": _fact(s), "projects": [s, "github.com/globex/web"]}
    out = rulepatch.propose(root, cand, "AGENTS.md")
    patch = Path(out["path"]).read_text("utf-8")
    added = [ln for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(added) == 1 and added[0].startswith("+- ")
    _git(root, "apply", out["path"])
    after = agents.read_text("utf-8")
    assert after.startswith(before) and after.count("\n") == before.count("\n") + 1
    assert after.count("<!--") == before.count("<!--") and "```" not in after
