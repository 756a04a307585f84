"""The correction detector (factbank_client.hook.correction) on its labelled set, and what it costs
the prompt hook.

    factbank eval corrections [--ab N] [--json]

* Precision and recall on evals/sets/corrections/prompts.jsonl: real-looking prompts, about
  half of them corrections, in English, Chinese and mixed, with hard negatives (questions
  opening with "no", "actually, can you...", code and error messages holding "not", Chinese
  questions holding 不对 / 应该是). Split into dev (the rules were tuned on it) and test.
  Targets: precision >= 0.9, recall >= 0.7.
* The detector's own time per prompt, in process (its import, once, and each call), and in a
  fresh interpreter as the hook pays it (the module imported and one call).
* With `--ab N`: an A/B of the real prompt hook (the command `factbank install` registers, one
  process per prompt, against a real stack), the same prompts with the detector and with it
  replaced by a stub that says "no", interleaved, corrections and other prompts alternating.
  Target: it adds <= 2 ms to the p50, judged on the hook process's CPU time (wall time is
  printed too; on a loaded machine it is noise).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

SET = Path(__file__).parent / "sets" / "corrections" / "prompts.jsonl"
TARGET_PRECISION = 0.9
TARGET_RECALL = 0.7
TARGET_MS = 2.0


def load(path: Path = SET) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _pr(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    tp = sum(g and t for g, t in pairs)
    fp = sum(g and not t for g, t in pairs)
    fn = sum(t and not g for g, t in pairs)
    return {"n": len(pairs), "positives": tp + fn, "tp": tp, "fp": fp, "fn": fn,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None}


def score(rows: list[dict]) -> dict[str, Any]:
    """Precision/recall overall, per split and per language; false positives on the hard
    negatives; the errors themselves (to read)."""
    from factbank_client.hook.correction import is_correction

    slices: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    errors = []
    hard_fp = hard_n = 0
    for r in rows:
        got, truth = is_correction(r["prompt"]), bool(r["correction"])
        for key in ("all", f"split:{r['split']}", f"lang:{r['lang']}"):
            slices[key].append((got, truth))
        if r.get("hard") and not truth:
            hard_n += 1
            hard_fp += got
        if got != truth:
            errors.append({"id": r["id"], "prompt": r["prompt"], "truth": truth})
    return {"slices": {k: _pr(v) for k, v in sorted(slices.items())},
            "hard_negatives": {"n": hard_n, "false_positives": hard_fp}, "errors": errors}


def time_in_process(rows: list[dict], repeat: int = 50) -> dict[str, Any]:
    """Each prompt's median call time (µs) over `repeat` calls, then p50/p95/max over
    prompts; and the module's import time (ms, once)."""
    import importlib
    import sys

    sys.modules.pop("factbank_client.hook.correction", None)
    t = time.perf_counter()
    correction = importlib.import_module("factbank_client.hook.correction")
    imported_ms = (time.perf_counter() - t) * 1000
    per = []
    for r in rows:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter_ns()
            correction.is_correction(r["prompt"])
            times.append(time.perf_counter_ns() - t0)
        per.append(statistics.median(times) / 1000)
    per.sort()
    return {"import_ms": round(imported_ms, 3), "call_p50_us": round(per[len(per) // 2], 1),
            "call_p95_us": round(per[int(len(per) * 0.95)], 1), "call_max_us": round(per[-1], 1)}


FRESH = ("import sys, time; sys.path.insert(0, {root!r}); import json, os; "
         "import factbank_client; t = time.perf_counter(); "
         "from factbank_client.hook import correction; correction.is_correction({prompt!r}); "
         "print((time.perf_counter() - t) * 1000)")


def time_fresh(rows: list[dict], n: int = 30) -> dict[str, Any]:
    """What the hook pays: in a new `python -I -S` process (as the hook runs) with `json` and
    the package already loaded (the hook has both), the module's import and one call."""
    from factbank_client.install.common import hook_script, python_exe

    root = str(Path(hook_script()).parent.parent)
    times = []
    for i in range(n):
        prompt = rows[i % len(rows)]["prompt"]
        out = subprocess.run([python_exe(), "-I", "-S", "-c",
                              FRESH.format(root=root, prompt=prompt)],
                             capture_output=True, text=True, check=True, timeout=30)
        times.append(float(out.stdout))
    return {"n": n, "p50_ms": round(statistics.median(times), 3),
            "max_ms": round(max(times), 3)}


STUB = ("import sys, types; sys.path.insert(0, {root!r}); "
        "m = types.ModuleType('factbank_client.hook.correction'); "
        "m.is_correction = lambda p: False; m.nudge = lambda s: ''; "
        "sys.modules['factbank_client.hook.correction'] = m; "
        "sys.argv = ['hooks.py', 'user-prompt-submit']; "
        "from factbank_client.hook.entry import run; run()")
REAL = ("import sys; sys.path.insert(0, {root!r}); "
        "sys.argv = ['hooks.py', 'user-prompt-submit']; "
        "from factbank_client.hook.entry import run; run()")


def hook_ab(rows: list[dict], n: int) -> dict[str, Any]:
    """The prompt hook with the detector (A) and with a stub (B), interleaved, one process per
    prompt, against a real stack holding a few facts; p50 per arm, overall and on the
    correction prompts alone (those also make the service record a nudge)."""
    import tempfile
    import uuid

    import httpx

    from factbank_client.install.common import hook_script, python_exe
    from factbank_evals.bench_hooks import make_home, payload, timed
    from factbank_evals.stack import running_stack

    root = str(Path(hook_script()).parent.parent)
    arms = {"A": [python_exe(), "-I", "-S", "-c", REAL.format(root=root)],
            "B": [python_exe(), "-I", "-S", "-c", STUB.format(root=root)]}
    got: dict[str, list[float]] = {"A": [], "B": [], "A_corr": [], "B_corr": [],
                                   "A_other": [], "B_other": [], "A_cpu": [], "B_cpu": []}
    nudged = 0
    with running_stack() as stack, tempfile.TemporaryDirectory() as tmp:
        with httpx.Client(headers=stack.headers(), timeout=120) as http:
            for content in ("We use pnpm, never npm, for this repository",
                            "The API listens on port 8081 in staging",
                            "测试环境的数据库在 10.0.3.12"):
                http.post(stack.ingest + "/v1/facts", json={
                    "content": content, "category": "project", "source": {"kind": "user"},
                    "quote": content, "origin": "user",
                    "project": "github.com/acme/bench-api"}).raise_for_status()
        env, repo = make_home(Path(tmp), stack.recall, stack.ingest, stack.token)
        for arm in ("A", "B", "A", "B"):  # warm
            timed(arms[arm], payload("UserPromptSubmit", str(uuid.uuid4()), repo, "hi"), env,
                  repo)
        yes = [r for r in rows if r["correction"]]
        no = [r for r in rows if not r["correction"]]
        mixed = [x for pair in zip(yes, no, strict=False) for x in pair]  # alternate
        for i in range(n):
            r = mixed[i % len(mixed)]
            # The order flips every second prompt, so corrections (even i) and other prompts
            # (odd i) each go first in both arms: the second run of a prompt is served from
            # the recall cache, and a fixed order per kind made A look 60-95 ms slower on
            # corrections and as much faster on the others.
            for arm in (("A", "B") if (i // 2) % 2 == 0 else ("B", "A")):
                ms, cpu, out = timed(arms[arm], payload("UserPromptSubmit", str(uuid.uuid4()),
                                                      repo, r["prompt"]), env, repo)
                got[arm].append(ms)
                got[arm + "_cpu"].append(cpu)
                got[arm + ("_corr" if r["correction"] else "_other")].append(ms)
                if arm == "A" and b"correcting you" in out:
                    nudged += 1
    p50 = {k: round(statistics.median(v), 2) if v else None for k, v in got.items()}
    return {"n": n, "p50_ms": p50, "nudges_shown": nudged,
            "added_p50_ms": round(p50["A"] - p50["B"], 2),
            "added_cpu_p50_ms": round(p50["A_cpu"] - p50["B_cpu"], 2),
            "added_p50_ms_corrections": round(p50["A_corr"] - p50["B_corr"], 2)
            if p50["A_corr"] is not None else None,
            "added_p50_ms_others": round(p50["A_other"] - p50["B_other"], 2)
            if p50["A_other"] is not None else None}


def evaluate(ab: int = 0, fresh: int = 30) -> dict[str, Any]:
    rows = load()
    import os

    out: dict[str, Any] = {"set": str(SET.relative_to(Path(__file__).parent.parent)),
                           "n": len(rows), **score(rows),
                           "in_process": time_in_process(rows)}
    if fresh:
        out["fresh_process"] = time_fresh(rows, fresh)
    if ab:
        out["hook_ab"] = hook_ab(rows, ab)
    out["load_avg"] = list(os.getloadavg())
    s = out["slices"]["all"]
    # The time target is judged on what the detector costs the hook process: its CPU time in
    # the A/B and the fresh-process import + call. Wall time on this shared 2-core machine
    # swung by +-90 ms between arms of the same run (load average 16-19), hiding 2 ms.
    out["meets_target"] = (s["precision"] or 0) >= TARGET_PRECISION and (
        s["recall"] or 0) >= TARGET_RECALL and ("hook_ab" not in out or out["hook_ab"][
            "added_cpu_p50_ms"] <= TARGET_MS) and ("fresh_process" not in out or out[
                "fresh_process"]["p50_ms"] <= TARGET_MS)
    return out


def table(result: dict[str, Any]) -> str:
    lines = [f"correction detector on {result['set']} ({result['n']} prompts)", "",
             "| slice | n | corrections | precision | recall | FP | FN |",
             "|---|---|---|---|---|---|---|"]
    for name, s in result["slices"].items():
        lines.append(f"| {name} | {s['n']} | {s['positives']} | {s['precision']} "
                     f"| {s['recall']} | {s['fp']} | {s['fn']} |")
    h = result["hard_negatives"]
    lines += ["", f"hard negatives: {h['false_positives']} false positives of {h['n']}",
              f"targets: precision >= {TARGET_PRECISION}, recall >= {TARGET_RECALL}", ""]
    t = result["in_process"]
    lines.append(f"in process, per prompt: p50 {t['call_p50_us']} µs, p95 "
                 f"{t['call_p95_us']} µs, max {t['call_max_us']} µs")
    if "fresh_process" in result:
        f = result["fresh_process"]
        lines.append(f"fresh `python -I -S` process (as the hook): import + one call p50 "
                     f"{f['p50_ms']} ms, max {f['max_ms']} ms (n={f['n']})")
    if "hook_ab" in result:
        a = result["hook_ab"]
        p = a["p50_ms"]
        lines += ["", "| prompt hook (one process per prompt) | p50 ms, all | corrections "
                  "| other prompts |", "|---|---|---|---|",
                  f"| A: with the detector | {p['A']} | {p['A_corr']} | {p['A_other']} |",
                  f"| B: detector stubbed out | {p['B']} | {p['B_corr']} | {p['B_other']} |",
                  f"| added (A - B) | {a['added_p50_ms']} | {a['added_p50_ms_corrections']} "
                  f"| {a['added_p50_ms_others']} |",
                  "", f"CPU time of the hook process, p50: A {p['A_cpu']} ms, B {p['B_cpu']} ms,"
                  f" added {a['added_cpu_p50_ms']} ms (wall time on a loaded machine is noise"
                  " the CPU time is not)",
                  "", f"{a['n']} prompts per arm, interleaved; nudges shown by A: "
                  f"{a['nudges_shown']}; target: adds <= {TARGET_MS} ms to the p50"]
    lines.append(f"(load average {result['load_avg'][0]:.2f}: timings on a shared machine)")
    if result["errors"]:
        lines += ["", "errors:"] + [f"- #{e['id']} ({'missed' if e['truth'] else 'false alarm'})"
                                    f": {e['prompt']}" for e in result["errors"]]
    return "\n".join(lines)
