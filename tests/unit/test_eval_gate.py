"""The regression gate (`factbank_evals.gate`): every set and split that moved by more than one
point, either way, is marked with the commit range; nothing else is."""

from __future__ import annotations

import copy

import pytest

from factbank_evals import gate


def _report(commit: str, r5: dict[str, dict[str, float]], kinds: dict | None = None,
            options: dict | None = None) -> dict:
    sets = []
    for name, methods in r5.items():
        summary = {m: {"r@5": v, "r@5_by_kind": dict((kinds or {}).get((name, m), {}))}
                   for m, v in methods.items()}
        sets.append({"set": name, "summary": summary})
    return {"code": {"commit": commit, "uncommitted": []}, "options": options or {},
            "sets": sets}


BEFORE = _report("aaa1111", {"mlqa-r-zh-dev": {"dense": 0.751, "hybrid": 0.811, "bm25": 0.711},
                             "agent-memory": {"dense": 0.70, "hybrid": 0.75}},
                 kinds={("agent-memory", "dense"): {"paraphrase": 0.467, "exact": 0.985}})

# (set, split, after, marked): up, down, exactly one point, under a point, a kind split.
CASES = [
    ("mlqa-r-zh-dev", "dense", 0.815, True),
    ("mlqa-r-zh-dev", "hybrid", 0.799, True),
    ("mlqa-r-zh-dev", "bm25", 0.721, False),  # exactly +1.0: not more than one point
    ("agent-memory", "hybrid", 0.755, False),
    ("agent-memory", "dense / paraphrase", 0.40, True),
    ("agent-memory", "dense / exact", 0.99, False),
]


def _after() -> dict:
    new = copy.deepcopy(BEFORE)
    new["code"]["commit"] = "bbb2222"
    by = {s["set"]: s for s in new["sets"]}
    for name, split, after, _ in CASES:
        method, _, kind = split.partition(" / ")
        if kind:
            by[name]["summary"][method]["r@5_by_kind"][kind] = after
        else:
            by[name]["summary"][method]["r@5"] = after
    return new


@pytest.mark.parametrize(("name", "split", "after", "marked"), CASES)
def test_moves_of_more_than_one_point_either_way_are_marked(name, split, after, marked):
    result = gate.compare(BEFORE, _after())
    row = next(r for r in result["rows"] if (r["set"], r["split"]) == (name, split))
    assert row["after"] == after
    assert row["moved"] is marked
    assert result["range"] == "aaa1111..bbb2222"
    table = gate.markdown(result)
    assert (f"| {name} | {split} |" in table) is marked


def test_sets_only_in_one_report_are_listed_not_compared():
    new = _report("ccc", {"mlqa-r-zh-dev": {"dense": 0.751}, "new-set": {"dense": 0.5}})
    result = gate.compare(BEFORE, new)
    assert result["new_sets"] == ["new-set"]
    assert result["gone_sets"] == ["agent-memory"]
    assert [(r["set"], r["split"]) for r in result["rows"]] == [("mlqa-r-zh-dev", "dense")]


def test_a_run_with_other_options_says_it_is_not_comparable():
    new = _report("ddd", {"mlqa-r-zh-dev": {"dense": 0.9}}, options={"max_queries": 20})
    result = gate.compare(BEFORE, new)
    assert not result["comparable"]
    assert "Not comparable" in gate.markdown(result)


def test_the_baseline_is_the_newest_committed_report():
    found = gate.last_committed_report()
    assert found is not None
    path, old = found
    assert path.name == "report.json" and old["sets"]
    result = gate.against_last(old)  # the baseline against itself: nothing moved
    assert result is not None and result["rows"]
    assert not any(r["moved"] for r in result["rows"])
