"""The session block the services build holds no structure of a bank member's making: a
fact's content, project and tags, a handoff's text and files, a teammate's agent and
machine names, each set to every hostile string, give a block with exactly the lines a benign
bank gives, and no control or invisible character."""

from __future__ import annotations

import unicodedata

from tests.integration.conftest import auth, fact_body
from tests.unit.hostile_text import HOSTILE

BENIGN = "use pnpm, never npm"
INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}


async def _block(stack, bank, n: int, s: str) -> tuple[str, bool]:
    """Plant `s` everywhere a bank member can, in a project of its own; the next session's
    block, and whether the services took it (a refused value is safe too)."""
    project = f"github.com/acme/p{n}"
    r = await stack.ingest.post("/v1/facts", headers=auth(bank.rw), json={
        **fact_body(s[:990] or "x"), "project": project, "tags": ["t", s[:38]]})
    took = r.status_code == 201
    r = await stack.ingest.post("/v1/handoffs", headers=auth(bank.rw), json={
        "text": s[:1500], "project": project, "files": [s[:200]]})
    took = took and r.status_code == 201
    r = await stack.ingest.post("/v1/timeline/events", headers=auth(bank.rw), json={"events": [
        {"session_id": f"other{n}", "kind": "session_start", "project": project,
         "agent": s[:60], "machine": s[:60], "branch": s[:60]},
        {"session_id": f"other{n}", "kind": "file", "project": project, "path": s[:200]}]})
    took = took and r.status_code == 201
    r = await stack.recall.post("/v1/inject", headers=auth(bank.ro), json={
        "kind": "session", "session_id": f"next{n}", "project": project})
    assert r.status_code == 200, r.text
    return r.json()["text"], took


async def test_a_session_block_has_the_benign_lines_whatever_the_bank_holds(stack, two_banks):
    alpha, _ = two_banks
    benign, _ = await _block(stack, alpha, 0, BENIGN)
    assert "Handoff" in benign and "(trust" in benign and benign.count("\n") >= 4
    took = []
    for n, (case, s) in enumerate(sorted(HOSTILE.items()), 1):
        text, ok = await _block(stack, alpha, n, s)
        if ok:  # all of it stored: the block has the benign one's lines
            took.append(case)
            assert text.count("\n") == benign.count("\n"), (case, text[:800])
        bad = {f"U+{ord(c):04X}" for c in text
               if c != "\n" and unicodedata.category(c) in INVISIBLE}
        assert not bad, (case, bad)
    assert len(took) >= len(HOSTILE) - 2, took  # the services store all but NUL and the like
