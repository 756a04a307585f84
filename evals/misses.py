"""The miss-count eval: scripted sessions through the real hooks, on two machines, with known
repeats of each kind; the counts `factbank stats --misses` reports must match EXACTLY.

    factbank eval misses [--json]

A real stack (factbank_evals.stack) and two machines: two HOMEs, each with its own client
config, hook cache and session markers. Each session is a stand-in harness: a process of its
own (`python -m factbank_evals.misses harness`) that runs, as its children, the hook command
`factbank install` registers (`python -I -S .../hooks.py <event>`, fed a Codex-shaped
payload) and the `factbank` CLI, as an agent's shell tool would. Nothing tells the CLI its
session: it finds it as it would in a harness (the hook's marker on their common parent).

The truth is kept by the script, not by the code under test: which write repeats which fact
and of what kind is written into the script; whether the held fact had been shown to the
session is read from what the session itself printed (the ids in its hooks' blocks and its
searches' answers); the corrections are the prompts the script labels as such. Then every
count (by kind, by class, repeated corrections, nudges, saves after a nudge, repeats of
nudged facts) and every repeat (held fact, kind, class) is compared with the report.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

PROJECT = "github.com/acme/bench-api"
NUDGE = "[factbank] The user is correcting you"
ID = re.compile(r"#(\d+)\b")

# The bank before the sessions: (key, category, content). Categories chosen so that the
# session-start block (auto-injected categories: preferences, environment, project) shows
# some and not others.
SEED = [
    ("port", "environment", "The staging API listens on port 8080"),
    ("helm", "decisions", "We deploy with helm, never with kubectl apply"),
    ("eaddr", "gotchas", "EADDRINUSE on port 8443 means the old worker still runs; stop it"),
    ("runbook", "reference", "The on-call runbook is the wiki page Runbook/Staging"),
]
PORT_8081 = "The staging API listens on port 8081"
# The current claim reworded and filed under another category: an equivalent existed.
PORT_8081_PROJECT = "In staging, the API listens on port 8081"

# Each session: the machine, and its steps. In a bank this small a session-start block shows
# nearly every fact, so the sessions meant to miss (s2, s3, s5) open with a prompt instead
# (its hook marks the session as well).
# Each session: the machine, and its steps. A step is a hook event, or a CLI command that an
# agent runs; `repeat` names the truth of a write that repeats a held fact: (kind, held key).
SESSIONS: list[dict[str, Any]] = [
    {"name": "s1", "machine": "A", "steps": [
        {"hook": "session-start"},
        {"hook": "user-prompt-submit", "prompt": "which port does the staging API use?"},
        {"add": ("environment", "The staging API listens on port 8080"),
         "repeat": ("same", "port")},
    ]},
    {"name": "s2", "machine": "A", "steps": [
        {"hook": "user-prompt-submit", "prompt": "bump the version to 1.5.0"},
        {"search": "how do we deploy, helm or kubectl?"},
        {"add": ("decisions", "We deploy with helm, never with kubectl apply"),
         "repeat": ("same", "helm")},
    ]},
    {"name": "s3", "machine": "B", "steps": [
        {"hook": "user-prompt-submit", "prompt": "write a changelog entry for the release"},
        {"add": ("gotchas", "EADDRINUSE on port 8443 means the old worker still runs; stop it"),
         "repeat": ("same", "eaddr")},
    ]},
    {"name": "s4", "machine": "B", "steps": [
        {"hook": "session-start"},
        {"hook": "user-prompt-submit", "correction": True,
         "prompt": "no, the staging API listens on 8081 now, not 8080"},
        {"supersede": (PORT_8081, "port"), "repeat": ("correction", "port"),
         "stores": "port2"},
    ]},
    {"name": "s5", "machine": "A", "steps": [
        {"hook": "user-prompt-submit", "prompt": "bump the version to 1.5.0"},
        {"add": ("project", PORT_8081_PROJECT), "repeat": ("equivalent", "port2"),
         "stores": "port3"},
    ]},
    {"name": "s6", "machine": "B", "steps": [
        {"hook": "session-start"},
        {"hook": "user-prompt-submit", "correction": True,
         "prompt": "no! I told you: the staging API is on 8081, not 8080"},
        {"add": ("environment", PORT_8081), "repeat": ("same", "port2"),
         "repeated_correction": True},
    ]},
    {"name": "s7", "machine": "A", "steps": [
        {"hook": "session-start"},
        {"add": ("environment", "The staging API listens on port 8080"),
         "repeat": ("retired", "port")},
    ]},
]
# A write outside any session (a person at a terminal): a repeat that is not classed.
OUTSIDE = {"add": ("reference", "The on-call runbook is the wiki page Runbook/Staging"),
           "repeat": ("same", "runbook")}


def _cli() -> list[str]:
    return [str(Path(sys.executable).parent / "factbank")]


def _add_args(category: str, content: str) -> list[str]:
    return ["add", content, "--category", category, "--quote", content, "--origin", "user",
            "--json"]


def harness(argv: list[str]) -> int:
    """A stand-in harness process: run the steps given on stdin as its own children (hooks
    with their payloads, CLI commands) and print what each printed, as JSON."""
    from factbank_client.install.common import hook_script, python_exe
    from factbank_evals.bench_hooks import payload

    job = json.loads(sys.stdin.read())
    repo, session = Path(job["repo"]), job["session"]
    outputs = []
    for step in job["steps"]:
        if "hook" in step:
            event = {"session-start": "SessionStart",
                     "user-prompt-submit": "UserPromptSubmit"}[step["hook"]]
            argv_ = [python_exe(), "-I", "-S", hook_script(), step["hook"]]
            stdin = payload(event, session, repo, step.get("prompt", ""))
        else:
            argv_, stdin = _cli() + step["argv"], b""
        proc = subprocess.run(argv_, input=stdin, capture_output=True, cwd=repo, timeout=120)
        outputs.append({"rc": proc.returncode, "out": proc.stdout.decode("utf-8", "replace"),
                        "err": proc.stderr.decode("utf-8", "replace")[-500:]})
    print(json.dumps(outputs))
    return 0


def _machine(root: Path, name: str, stack: Any) -> tuple[dict, Path]:
    from factbank_evals.bench_hooks import make_home

    env, repo = make_home(root / name, stack.recall, stack.ingest, stack.token)
    env["FACTBANK_HOOK_TIMEOUT"] = "5"  # a loaded machine must not lose a block to the clock
    env["FACTBANK_TIMELINE"] = "0"
    return env, repo


def _shown_ids(text: str) -> set[int]:
    """The fact ids a hook's block or a search's answer put in front of the agent (the nudge
    line only names an id: not shown)."""
    lines = [ln for ln in text.splitlines() if NUDGE not in ln]
    return {int(m) for m in ID.findall("\n".join(lines))}


def run_script(stack: Any, root: Path) -> dict[str, Any]:
    """Seed the bank, run every session as a harness process, and return the truth."""
    import httpx

    ids: dict[str, int] = {}
    with httpx.Client(headers=stack.headers(), timeout=120) as http:
        for key, category, content in SEED:
            r = http.post(stack.ingest + "/v1/facts", json={
                "content": content, "category": category, "source": {"kind": "user"},
                "quote": content, "origin": "user", "project": PROJECT})
            r.raise_for_status()
            ids[key] = r.json()["fact"]["id"]
    machines = {m: _machine(root, m, stack) for m in ("A", "B")}
    truth: list[dict[str, Any]] = []
    nudges = shown_nudges = saves_after_nudge = 0
    saved_after_nudge: set[int] = set()  # facts a write in a nudged session left
    for s in SESSIONS:
        env, repo = machines[s["machine"]]
        sid = f"{s['name']}-{uuid.uuid4()}"
        steps = []
        for step in s["steps"]:
            if "add" in step:
                steps.append({"argv": _add_args(*step["add"])})
            elif "supersede" in step:
                content, old = step["supersede"]
                steps.append({"argv": ["supersede", content, str(ids[old]), "--reason",
                                       "the user said so", "--quote", content, "--json"]})
            elif "search" in step:
                steps.append({"argv": ["search", step["search"], "--related", "--json"]})
            else:
                steps.append(step)
        proc = subprocess.run([sys.executable, "-m", "factbank_evals.misses", "harness"],
                              input=json.dumps({"repo": str(repo), "session": sid,
                                                "steps": steps}),
                              capture_output=True, text=True, env=env, cwd=repo, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"session {s['name']}: {proc.stderr[-1000:]}")
        outputs = json.loads(proc.stdout)
        seen_inject: set[int] = set()
        seen_search: set[int] = set()
        nudged = False
        for step, out in zip(s["steps"], outputs, strict=True):
            nudged = nudged or bool(step.get("correction"))
            if out["rc"] != 0:
                raise RuntimeError(f"session {s['name']} step {step}: {out['err']}")
            if "hook" in step:
                text = json.loads(out["out"] or "{}").get("hookSpecificOutput", {}).get(
                    "additionalContext", "")
                seen_inject |= _shown_ids(text)
                if step.get("correction"):
                    nudges += 1
                    shown_nudges += NUDGE in text
            elif "search" in step:
                seen_search |= {h["fact"]["id"] for h in json.loads(out["out"])["results"]}
            if "stores" in step:
                ids[step["stores"]] = json.loads(out["out"])["fact"]["id"]
            if "repeat" in step:
                kind, key = step["repeat"]
                held = ids[key]
                truth.append({
                    "session": s["name"], "machine": s["machine"], "kind": kind, "fact": held,
                    "shown": "injected" if held in seen_inject else "searched"
                    if held in seen_search else "never",
                    "repeated_correction": bool(step.get("repeated_correction")),
                    "nudged": nudged, "of_nudged": held in saved_after_nudge,
                })
            if nudged and ("add" in step or "supersede" in step) and (
                    "repeat" not in step or step["repeat"][0] != "retired"):
                saves_after_nudge += 1
                saved_after_nudge.add(ids[step["stores"]] if "stores" in step else
                                      ids[step["repeat"][1]])
    # Outside any session: straight from the eval process (no harness, no marker).
    env, repo = machines["A"]
    out = subprocess.run(_cli() + _add_args(*OUTSIDE["add"]), capture_output=True, text=True,
                         env=env, cwd=repo, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    truth.append({"session": None, "machine": "A", "kind": "same", "fact": ids["runbook"],
                  "shown": "unknown", "repeated_correction": False, "nudged": False,
                  "of_nudged": ids["runbook"] in saved_after_nudge})
    return {"ids": ids, "truth": truth, "nudges": nudges, "nudges_shown": shown_nudges,
            "saves_after_nudge": saves_after_nudge, "env": env, "repo": repo}


CLASS = {"never": "recall_miss", "injected": "presentation_miss",
         "searched": "presentation_miss", "unknown": "no_session"}


def expected_totals(run: dict[str, Any]) -> dict[str, int]:
    truth = run["truth"]
    kinds = Counter(t["kind"] for t in truth)
    classes = Counter(CLASS[t["shown"]] for t in truth)
    return {"repeats": len(truth), **{k: kinds[k] for k in ("same", "correction", "equivalent",
                                                            "retired")},
            **{c: classes[c] for c in ("recall_miss", "presentation_miss", "no_session")},
            "repeated_correction": sum(t["repeated_correction"] for t in truth),
            "recognised": run["nudges"], "saved_after_nudge": run["saves_after_nudge"],
            "repeats_of_nudged": sum(t["of_nudged"] for t in truth)}


def evaluate() -> dict[str, Any]:
    """Run the script against a throwaway stack and compare; `exact` when every count and
    every repeat matches."""
    from factbank_evals.stack import running_stack

    with running_stack() as stack, tempfile.TemporaryDirectory() as tmp:
        run = run_script(stack, Path(tmp))
        out = subprocess.run([*_cli(), "stats", "--misses", "--json"], capture_output=True,
                             text=True, env=run["env"], cwd=run["repo"], timeout=120)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        report = next(iter(json.loads(out.stdout).values()))
        table_text = subprocess.run([*_cli(), "stats", "--misses"], capture_output=True,
                                    text=True, env=run["env"], cwd=run["repo"],
                                    timeout=120).stdout
    truth = run["truth"]
    expected = expected_totals(run)
    got = {k: report["totals"].get(k) for k in expected}
    want_rows = sorted((t["fact"], t["kind"], t["shown"]) for t in truth)
    got_rows = sorted((f["id"], f["kind"], f["shown"]) for w in report["weeks"]
                      for f in w["facts"])
    covered = {t["kind"] for t in truth} | {t["shown"] for t in truth}
    return {
        "sessions": len(SESSIONS), "machines": 2, "expected": expected, "reported": got,
        "repeats_expected": want_rows, "repeats_reported": got_rows,
        "nudges_shown": run["nudges_shown"],
        "covers_every_kind_and_class": covered >= {"same", "correction", "equivalent", "retired",
                                                   "injected", "searched", "never",
                                                   "unknown"},
        "exact": expected == got and want_rows == got_rows
        and run["nudges_shown"] == run["nudges"],
        "truth": truth, "cli_table": table_text,
    }


def table(result: dict[str, Any]) -> str:
    lines = [f"miss counting: {result['sessions']} scripted sessions on {result['machines']} "
             "machines through the real hooks and CLI", "",
             "| count | expected (script) | reported (stats --misses) |", "|---|---|---|"]
    for k, v in result["expected"].items():
        mark = "" if result["reported"][k] == v else " MISMATCH"
        lines.append(f"| {k} | {v} | {result['reported'][k]}{mark} |")
    lines += ["", f"each repeat (fact, kind, shown) matches: "
              f"{result['repeats_expected'] == result['repeats_reported']}",
              f"nudges shown by the prompt hook: {result['nudges_shown']} of "
              f"{result['expected']['recognised']}",
              f"every kind and class covered: {result['covers_every_kind_and_class']}",
              f"EXACT: {result['exact']}", "", "| session | machine | held fact | kind | shown "
              "| repeated correction |", "|---|---|---|---|---|---|"]
    lines += [f"| {t['session'] or '(none)'} | {t['machine']} | #{t['fact']} | {t['kind']} "
              f"| {t['shown']} | {t['repeated_correction']} |" for t in result["truth"]]
    lines += ["", "`factbank stats --misses` said:", "", result["cli_table"].rstrip()]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["harness"]:
        raise SystemExit(harness(sys.argv[2:]))
    result = evaluate()
    print(table(result))
    raise SystemExit(0 if result["exact"] else 1)
