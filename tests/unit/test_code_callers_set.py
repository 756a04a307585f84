"""The hand-checked find_callers list (evals/sets/code-callers) stays true to its commit, and
the bench scores it as it says."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from factbank_evals.bench_code import SET, score

ROOT = Path(__file__).resolve().parents[2]


def test_every_listed_call_site_names_its_symbol_at_the_commit():
    data = json.loads(SET.read_text("utf-8"))
    commit = data["commit"]
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                      capture_output=True).returncode:
        pytest.skip(f"commit {commit[:7]} is not in this clone (a shallow checkout)")
    sites = 0
    for case in data["symbols"] + data["held_out"]:
        name = case["symbol"].rsplit("::", 1)[1].rsplit(".", 1)[-1]
        for path, line in case["callers"] + case.get("indirect", []):
            text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                                  capture_output=True, text=True, check=True).stdout
            assert name in text.splitlines()[line - 1], (case["symbol"], path, line)
            sites += 1
    assert len(data["symbols"]) >= 30 and sites >= 130


def test_score_counts_call_sites_at_the_threshold():
    cases = [{"symbol": "a.py::f", "callers": [["b.py", 3], ["c.py", 9]]},
             {"symbol": "a.py::g", "callers": []}]
    found = {"a.py::f": {"symbol": {}, "callers": [
                 {"path": "b.py", "line": 3, "confidence": 0.95},
                 {"path": "c.py", "line": 9, "confidence": 0.4},
                 {"path": "d.py", "line": 1, "confidence": 0.6}]},
             "a.py::g": {"symbol": {}, "callers": [{"path": "e.py", "line": 2,
                                                   "confidence": 0.2}]}}
    strict = score(cases, found, 0.5)
    assert (strict["tp"], strict["fp"], strict["fn"]) == (1, 1, 1)
    assert strict["precision"] == 0.5 and strict["recall"] == 0.5
    loose = score(cases, found, 0.01)
    assert (loose["tp"], loose["fp"], loose["fn"]) == (2, 2, 0)
