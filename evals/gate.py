"""The regression gate: a new `factbank eval all` against the last committed report.

Why: a retrieval change that helps the set it was made for can cost another set a few points
unnoticed (the native-Chinese set lost 6.8 points of dense R@5 while every translated set held).
So every run compares itself with the report last committed under `evals/reports/*/report.json`
and marks each set, method and query-kind split whose R@5 moved by more than one point, either
way, naming the commit range in between. The closing note of a retrieval change carries this
table.

A split is `<method>` (R@5 over the set's answerable queries) or `<method> / <kind>` (R@5 of
one query kind, agent-memory's exact, paraphrase, ...). Only sets and splits present in both
reports are compared; the others are listed as new or gone, never as moves. A run with
`--max-queries` or `--per-kind` is not comparable with a full one: the table says so.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

THRESHOLD_POINTS = 1.0
ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str, root: Path = ROOT) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True).stdout


def last_committed_report(root: Path = ROOT) -> tuple[Path, dict] | None:
    """The newest committed `evals/reports/<date>/report.json` (by folder name, then commit
    time), read as committed at HEAD, and the path it came from. None if there is none."""
    try:
        paths = _git("ls-files", "evals/reports/*/report.json", root=root).split()
    except (OSError, subprocess.CalledProcessError):
        return None
    if not paths:
        return None
    path = sorted(paths)[-1]
    text = _git("show", f"HEAD:{path}", root=root)
    return root / path, json.loads(text)


def _splits(section: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for method, s in (section.get("summary") or {}).items():
        if s.get("r@5") is not None:
            out[method] = s["r@5"]
        for kind, v in (s.get("r@5_by_kind") or {}).items():
            if v is not None and kind != "beir":
                out[f"{method} / {kind}"] = v
    return out


def compare(old: dict, new: dict, threshold: float = THRESHOLD_POINTS) -> dict:
    """Every (set, split) of both reports with its R@5 then and now; `moved` marks those that
    moved by more than `threshold` points. `range` is the commit range between the two."""
    old_sets = {s["set"]: s for s in old.get("sets", [])}
    new_sets = {s["set"]: s for s in new.get("sets", [])}
    rows = []
    for name, sec in new_sets.items():
        if name not in old_sets:
            continue
        before, after = _splits(old_sets[name]), _splits(sec)
        for split in after:
            if split not in before:
                continue
            delta = round((after[split] - before[split]) * 100, 1)
            rows.append({"set": name, "split": split, "before": before[split],
                         "after": after[split], "delta_points": delta,
                         "moved": abs(delta) > threshold})
    old_code, new_code = old.get("code") or {}, new.get("code") or {}
    return {
        "range": f"{old_code.get('commit', '?')}..{new_code.get('commit', '?')}",
        "uncommitted": new_code.get("uncommitted") or [],
        "threshold_points": threshold,
        "comparable": (old.get("options") or {}) == (new.get("options") or {}),
        "options": {"before": old.get("options"), "after": new.get("options")},
        "new_sets": sorted(set(new_sets) - set(old_sets)),
        "gone_sets": sorted(set(old_sets) - set(new_sets)),
        "rows": rows,
    }


def against_last(new: dict, root: Path = ROOT) -> dict | None:
    """`compare` with the last committed report, naming it; None if there is none."""
    found = last_committed_report(root)
    if found is None:
        return None
    path, old = found
    out = compare(old, new)
    out["baseline"] = str(path.relative_to(root))
    return out


def markdown(gate: dict) -> str:
    """The gate as the report prints it: every move first, then how many held."""
    moved = [r for r in gate["rows"] if r["moved"]]
    lines = [
        f"Against `{gate.get('baseline', 'the baseline')}`, commits {gate['range']}"
        + (f" (plus uncommitted {', '.join(gate['uncommitted'])})" if gate["uncommitted"]
           else "")
        + f": {len(moved)} of {len(gate['rows'])} set/split R@5 figures moved by more than "
        f"{gate['threshold_points']:g} point.",
    ]
    if not gate["comparable"]:
        lines.append(f"Not comparable: options differ ({json.dumps(gate['options'])}).")
    if gate["new_sets"]:
        lines.append(f"New sets (no baseline): {', '.join(gate['new_sets'])}.")
    if gate["gone_sets"]:
        lines.append(f"Sets not run this time: {', '.join(gate['gone_sets'])}.")
    if moved:
        lines += ["", "| set | split | before | after | Δ points |", "|---|---|---|---|---|"]
        lines += [f"| {r['set']} | {r['split']} | {r['before']:.3f} | {r['after']:.3f} | "
                  f"**{r['delta_points']:+.1f}** |" for r in moved]
    return "\n".join(lines)
