"""factbank verify's reading of git's rename output (factbank_client/staleness/verify.py)."""

from __future__ import annotations

from factbank_client.staleness.verify import Verdict, _context, _name_status_pairs


def test_name_status_z_renames_only():
    out = ["M\0deploy/app.yaml\0R087\0docs/a.md\0docs/b.md\0D\0gone.md\0C100\0x\0y\0A\0new.md\0"]
    assert _name_status_pairs(out) == [("docs/a.md", "docs/b.md")]


def test_context_is_numbered_around_the_old_line_and_bounded():
    lines = [f"line {i}" for i in range(1, 11)]
    assert _context(lines, 5) == "3: line 3\n4: line 4\n5: line 5\n6: line 6\n7: line 7"
    assert _context(lines, 99).splitlines()[-1] == "10: line 10"
    assert _context([], 3) == ""
    assert len(_context(["x" * 5000], 1)) == 2000


def test_wire_sends_only_what_the_verdict_has():
    assert Verdict(3, "fresh", "a:1").wire() == {"id": 3, "verdict": "fresh"}
    assert Verdict(3, "stale", "a:1", reason="r", context="").wire() == \
        {"id": 3, "verdict": "stale", "reason": "r", "context": ""}
