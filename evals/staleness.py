"""The staleness eval: does `factbank verify` mark exactly the facts whose source
changed, follow the ones that only moved, and keep every stale fact out of injection?

A scripted git repository (`SCRIPT`): eight config files of twelve unique lines, three facts
quoting lines of each, two commit-sourced facts on a side branch and one on main. Its history
edits quoted lines, edits lines nobody quoted, inserts lines above quotes, changes a quoted
line's whitespace only, deletes a file, renames files (clean, and with a quoted line edited),
moves a block, deletes the side branch, and finally restores an edited line. After every step
(a commit) `verify` runs exactly as the CLI runs it (`factbank_client.cli.staleness.
run_verify`, over HTTP to a real stack), and each fact's stored status and location are
compared with the truth.

The truth is kept by the script itself, not by the code under test: each step edits a list of
lines per file and says what it renamed; a fact is stale once its exact line is gone from its
file (or its file is gone), and stays stale (only a confirm with a fresh quote revives one:
the restored line in the last step must not revive it); otherwise its true location is the
line that holds its text, nearest to where it was. A commit fact is stale once its commit is
on no branch.

Measured over every (step, fact) pair:
* stale precision and recall (target 1.00 / 1.00), and relocation accuracy of the facts that
  are not stale (their stored location is the true one);
* stale facts injected: after each step, a prompt that is each stale fact's own content, and
  the session block (target 0). The control: the same prompt for each fresh fact, so a 0 is not
  the 0 of an injection that returns nothing at all;
* the grep control (docs/principles.md#benchmarks-must-be-hard): "stale when the quote is no longer
in the file at the
  fact's original path", which knows nothing of moves or renames.

Symbol anchors (docs/staleness.md#symbol-anchors). The repository also holds real-shaped
code in each language with symbols (tests/fixtures/code: Python, TypeScript, JSX, Go, Rust),
and facts anchored to 14 of its definitions (`src/retry.py::RetryPolicy.backoff`). The
`CODE_SCRIPT` steps that follow drift every file's lines, reformat bodies (comments, blank
lines, spacing), edit five bodies without touching the quoted line, move a function and a Go
method to new files, rename a Python class, rename a Rust file and delete a method. Their
truth is declared by each step (which fact it stales, where a fact now is), never computed by
the parser under test. Measured: symbol precision/recall and location accuracy, beside two
controls under the same truth: each symbol fact's **line-anchored twin** (the same quote at
`path:line`, what a fact was before symbol anchors) and the grep control.

`factbank eval staleness [--out DIR] [--json]` prints the table; the committed reports are
evals/reports/2026-12-01/staleness.{json,md} and, with the symbol-anchored facts,
evals/reports/2026-12-02/staleness.{json,md}.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIT_ENV = {"GIT_AUTHOR_NAME": "eval", "GIT_AUTHOR_EMAIL": "eval@example.com",
           "GIT_COMMITTER_NAME": "eval", "GIT_COMMITTER_EMAIL": "eval@example.com"}
PROJECT = "github.com/factbank-eval/staleness"
FILES = 8
LINES = 12
QUOTED = (3, 6, 9)


def _line(f: int, j: int) -> str:
    return f"  setting_{f}_{j}: {f * 100 + j}"


@dataclass
class World:
    """The repository as the script knows it: each file's lines, and renames so far."""

    repo: Path
    files: dict[str, list[str]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # original path -> current

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.repo), *args], check=True,
                              capture_output=True, text=True,
                              env={**os.environ, **GIT_ENV}).stdout.strip()

    def write(self, path: str) -> None:
        full = self.repo / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text("\n".join(self.files[path]) + "\n", "utf-8")

    def rename(self, old: str, new: str) -> None:
        (self.repo / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)
        self.files[new] = self.files.pop(old)
        for orig, now in list(self.renamed.items()):
            if now == old:
                self.renamed[orig] = new
        self.renamed.setdefault(old, new)

    def current(self, original: str) -> str:
        return self.renamed.get(original, original)


def _edit(path: str, n: int, text: str) -> Callable[[World], None]:
    def op(w: World) -> None:
        w.files[path][n - 1] = text
        w.write(path)
    return op


def _insert(path: str, n: int, lines: list[str]) -> Callable[[World], None]:
    def op(w: World) -> None:
        w.files[path][n - 1:n - 1] = lines
        w.write(path)
    return op


def _delete(path: str) -> Callable[[World], None]:
    def op(w: World) -> None:
        w.git("rm", "-q", path)
        del w.files[path]
    return op


def _rename(old: str, new: str, edit: tuple[int, str] | None = None) -> Callable[[World], None]:
    def op(w: World) -> None:
        w.rename(old, new)
        if edit:
            w.files[new][edit[0] - 1] = edit[1]
            w.write(new)
    return op


def _move_block(path: str, src: int, dst: int) -> Callable[[World], None]:
    def op(w: World) -> None:
        line = w.files[path].pop(src - 1)
        w.files[path].insert(dst - 1, line)
        w.write(path)
    return op


def _drop_branch(w: World) -> None:
    w.git("branch", "-q", "-D", "side")


# (name, what it does, the operations); every step but the branch deletion is one commit.
SCRIPT: list[tuple[str, str, list[Callable[[World], None]]]] = [
    ("edit", "a quoted line changes; an unquoted line of the same file changes",
     [_edit("conf/app0.yaml", 3, "  setting_0_3: 9999"),
      _edit("conf/app0.yaml", 7, "  setting_0_7: 7777")]),
    ("insert", "two lines go in above every quote of a file",
     [_insert("conf/app1.yaml", 1, ["# generated", "# do not edit"])]),
    ("whitespace", "a quoted line gains trailing blanks and another indent",
     [_edit("conf/app2.yaml", 6, "      setting_2_6: 206   ")]),
    ("delete", "a file with three quoted lines is deleted", [_delete("conf/app3.yaml")]),
    ("rename", "a file is renamed, unchanged", [_rename("conf/app4.yaml", "etc/app4.yaml")]),
    ("rename-edit", "a file is renamed and one of its quoted lines edited",
     [_rename("conf/app5.yaml", "etc/app5.yaml", (6, "  setting_5_6: 5656"))]),
    ("move-block", "a quoted line moves to the top of its file",
     [_move_block("conf/app6.yaml", 9, 1)]),
    ("branch-deleted", "the side branch is deleted: its commits are unreachable",
     [_drop_branch]),
    ("restore", "the line edited in the first step is restored (a stale fact stays stale)",
     [_edit("conf/app0.yaml", 3, _line(0, 3))]),
]


CODE_FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "code"
# (fixture, path in the repository, [(key, symbol, a quote from its body)])
CODE: list[tuple[str, str, list[tuple[str, str, str]]]] = [
    ("retry.py", "src/retry.py", [
        ("py.backoff", "RetryPolicy.backoff", "delay = min(self.cap, self.base * 2 ** attempt)"),
        ("py.spend", "RetryPolicy.Budget.spend", "self.tokens -= 1"),
        ("py.fetch", "fetch_with_retry", "return await client.get(url)")]),
    ("retry.ts", "src/retry.ts", [
        ("ts.delay", "RetryPolicy.delay",
         "return this.jitter(Math.min(this.cap, 500 * 2 ** attempt));"),
        ("ts.run", "RetryPolicy.run", "if (attempt + 1 >= this.attempts) throw err;"),
        ("ts.withRetry", "withRetry", "return policy ? policy.run(run) : run();")]),
    ("widget.jsx", "ui/widget.jsx", [
        ("jsx.render", "Panel.render", "return <div>{this.props.title}</div>;"),
        ("jsx.close", "Panel.handleClose", "this.props.onClose();")]),
    ("retry.go", "retry/retry.go", [
        ("go.backoff", "Policy.Backoff", "d := p.Base << n"),
        ("go.do", "Do", "return ErrExhausted"),
        ("go.push", "Stack.Push", "s.items = append(s.items, v)")]),
    ("retry.rs", "src/retry.rs", [
        ("rs.backoff", "RetryPolicy.backoff", "self.base * 2u32.pow(attempt)"),
        ("rs.new", "RetryPolicy.new", "RetryPolicy { attempts, base: Duration::from_millis(500) }"),
        ("rs.fmt", "RetryPolicy.fmt", 'write!(f, "{} attempts", self.attempts)')]),
]


def _replace(path: str, old: str, new: str) -> Callable[[World], None]:
    """Replace the one occurrence of `old` in `path` (the step fails loudly if it is not
    there exactly once: a fixture that changed must not make the truth silently wrong)."""
    def op(w: World) -> None:
        text = "\n".join(w.files[path]) + "\n"
        if text.count(old) != 1:
            raise AssertionError(f"{path}: {old!r} occurs {text.count(old)} times")
        w.files[path] = text.replace(old, new).rstrip("\n").split("\n")
        w.write(path)
    return op


def _prepend_all(w: World) -> None:
    for _, path, _ in CODE:
        mark = "#" if path.endswith(".py") else "//"
        w.files[path][0:0] = [f"{mark} Generated header: do not edit.", f"{mark} (c) eval", ""]
        w.write(path)


def _move_out(path: str, start: str, end: str, to: str, head: str) -> Callable[[World], None]:
    """Cut the text from `start` through `end` (both unique) out of `path` into a new file
    `to`, after `head`."""
    def op(w: World) -> None:
        text = "\n".join(w.files[path]) + "\n"
        a = text.index(start)
        b = text.index(end, a) + len(end)
        w.files[path] = (text[:a] + text[b:]).rstrip("\n").split("\n")
        w.write(path)
        w.files[to] = (head + text[a:b]).rstrip("\n").split("\n")
        w.write(to)
    return op


# (name, what, operations, truth: fact key -> "stale" or its new location). One commit each.
CODE_SCRIPT: list[tuple[str, str, list[Callable[[World], None]], dict[str, str]]] = [
    ("code-drift", "three lines go in at the top of every code file", [_prepend_all], {}),
    ("code-reformat", "comments, blank lines and spacing change inside four quoted symbols",
     [_replace("src/retry.py", "        delay = min(", "        # capped, then jittered\n\n"
               "        delay = min("),
      _replace("retry/retry.go", "\tif d > MaxDelay {", "\t// never more than MaxDelay\n"
               "\tif d > MaxDelay   {"),
      _replace("src/retry.rs", "-> Duration {\n        self.base", "-> Duration {\n"
               "        // doubling\n        self.base"),
      _replace("src/retry.ts", "  delay(attempt: number): number {\n",
               "  delay(attempt: number): number {\n    // doubling, capped\n\n")], {}),
    ("code-body", "five bodies change on a line their fact does not quote",
     [_replace("src/retry.py", "if self.tokens <= 0:", "if self.tokens < 1:"),
      _replace("src/retry.ts", 'this.emit("retry", attempt);', 'this.emit("retry", attempt + 1);'),
      _replace("retry/retry.go", "for n := 0; n < p.Attempts; n++ {",
               "for n := 1; n < p.Attempts; n++ {"),
      _replace("src/retry.rs", "pub fn new(attempts: u32) -> Self {\n",
               "pub fn new(attempts: u32) -> Self {\n        let attempts = attempts.max(1);\n"),
      _replace("ui/widget.jsx", "handleClose = () => {\n",
               "handleClose = () => {\n    this.setState({ closed: true });\n")],
     {"py.spend": "stale", "ts.run": "stale", "go.do": "stale", "rs.new": "stale",
      "jsx.close": "stale"}),
    ("code-move-file", "a Python function and a Go method move to new files",
     [_move_out("src/retry.py", "async def fetch_with_retry(", "raise TransientError(url)\n",
                "src/fetch.py", "from retry import RetryPolicy, TransientError\n\n\n"),
      _move_out("retry/retry.go", "func (s *Stack[T]) Push(v T) {", "}\n",
                "retry/stack.go", "package retry\n\n")],
     {"py.fetch": "src/fetch.py::fetch_with_retry", "go.push": "retry/stack.go::Stack.Push"}),
    ("code-rename-class", "a Python class is renamed; its methods' bodies stay",
     [_replace("src/retry.py", "class RetryPolicy:", "class Backoff:")],
     {"py.backoff": "src/retry.py::Backoff.backoff"}),
    ("code-rename-file", "a Rust file is renamed (git mv)",
     [_rename("src/retry.rs", "src/policy.rs")],
     {"rs.backoff": "src/policy.rs::RetryPolicy.backoff",
      "rs.fmt": "src/policy.rs::RetryPolicy.fmt"}),
    ("code-delete", "a JSX method is deleted",
     [_replace("ui/widget.jsx", "  render() {\n    return <div>{this.props.title}</div>;\n"
               "  }\n", "")],
     {"jsx.render": "stale"}),
]


@dataclass
class Tracked:
    id: int
    kind: str  # file | commit | symbol | twin (a symbol fact's line-anchored twin)
    original: str  # path, or commit id
    text: str  # the quoted line, stripped (file facts)
    line: int = 0
    stale: bool = False  # the truth
    location: str = ""  # the true location while not stale
    key: str = ""  # symbol and twin facts: CODE's key


def _truth(w: World, facts: list[Tracked], reachable: Callable[[str], bool],
           declared: dict[str, str] | None = None) -> None:
    for f in facts:
        if f.kind in ("symbol", "twin"):  # what the step declared
            said = (declared or {}).get(f.key)
            if said == "stale":
                f.stale = True
            elif said and f.kind == "symbol" and not f.stale:
                f.location = said
            continue
        if f.stale:
            continue
        if f.kind == "commit":
            f.stale = not reachable(f.original)
            continue
        path = w.current(f.original)
        lines = [x.strip() for x in w.files.get(path, [])]
        hits = [i + 1 for i, x in enumerate(lines) if x == f.text]
        if not hits:
            f.stale = True
            continue
        f.line = min(hits, key=lambda n: (abs(n - f.line), n))
        f.location = f"{path}:{f.line}"


def _grep_control(w: World, f: Tracked) -> bool:
    """Stale when the quote is not in the file at the fact's original path."""
    if f.kind == "commit":
        return False
    full = w.repo / f.original
    return not full.is_file() or f.text not in full.read_text("utf-8")


def _add_code(w: World) -> None:
    for fixture, path, _ in CODE:
        w.files[path] = (CODE_FIXTURES / fixture).read_text("utf-8").rstrip("\n").split("\n")
        w.write(path)
    w.git("add", "-A")
    w.git("commit", "-q", "-m", "code")


def _counts(pred: dict[int, bool], truth: dict[int, bool]) -> tuple[int, int, int]:
    tp = sum(1 for i in truth if truth[i] and pred[i])
    fp = sum(1 for i in truth if not truth[i] and pred[i])
    fn = sum(1 for i in truth if truth[i] and not pred[i])
    return tp, fp, fn


def _pr(tp: int, fp: int, fn: int) -> tuple[float, float]:
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def build_world(root: Path) -> World:
    w = World(root / "repo")
    w.repo.mkdir(parents=True)
    w.git("init", "-q", "-b", "main")
    w.git("remote", "add", "origin", f"https://{PROJECT}.git")
    for f in range(FILES):
        path = f"conf/app{f}.yaml"
        w.files[path] = ["service:"] + [_line(f, j) for j in range(2, LINES + 1)]
        w.write(path)
    w.git("add", "-A")
    w.git("commit", "-q", "-m", "init")
    return w


def evaluate(stack: Any, *, steps: int | None = None, progress: bool = True,
             code_only: bool = False) -> dict:
    """Run the script against `stack` (evals/stack.py): the result the report shows.
    `steps`: only the first N steps of SCRIPT (CODE_SCRIPT still follows unless steps is
    given); `code_only`: CODE_SCRIPT alone."""
    from factbank_client.cli.staleness import run_verify
    from factbank_client.client import Client, new_fact
    from factbank_client.config import ClientConfig

    started = time.monotonic()
    run = uuid.uuid4().hex[:12]
    tmp = Path(tempfile.mkdtemp(prefix="factbank-staleness-"))
    w = build_world(tmp)
    cfg = ClientConfig(url=stack.ingest, recall_url=stack.recall,
                       tokens={"personal": stack.token})
    facts: list[Tracked] = []
    with Client(cfg, agent="eval") as client:
        def add(kind: str, location: str, quote: str, content: str) -> int:
            body = new_fact(content, "project", kind, location, quote, tags=["eval"],
                            origin="verified", project=PROJECT, cwd=w.repo)
            return int(client.add(body)["fact"]["id"])

        for f in range(FILES):
            for j in QUOTED:
                text = _line(f, j).strip()
                fid = add("file", f"conf/app{f}.yaml:{j}", text,
                          f"In app{f} the setting {f}_{j} is set to {f * 100 + j}")
                facts.append(Tracked(fid, "file", f"conf/app{f}.yaml", text, j,
                                     location=f"conf/app{f}.yaml:{j}"))
        w.git("checkout", "-q", "-b", "side")
        for k in range(2):
            (w.repo / f"side{k}.txt").write_text(f"side work {k}\n", "utf-8")
            w.git("add", "-A")
            w.git("commit", "-q", "-m", f"side work {k}")
            sha = w.git("rev-parse", "HEAD")
            facts.append(Tracked(add("commit", sha, f"side work {k}",
                                     f"The side branch has work item {k}"), "commit", sha, ""))
        w.git("checkout", "-q", "main")
        main_sha = w.git("rev-parse", "HEAD")
        facts.append(Tracked(add("commit", main_sha, "init", "The repository began with init"),
                             "commit", main_sha, ""))
        _add_code(w)
        for _, path, symbols in CODE:
            lines = w.files[path]
            for key, name, quote in symbols:
                loc = f"{path}::{name}"
                facts.append(Tracked(add("file", loc, quote, f"In the code, {name} does: {quote}"),
                                     "symbol", path, quote, location=loc, key=key))
                line = next(i + 1 for i, x in enumerate(lines) if quote in x)
                facts.append(Tracked(add("file", f"{path}:{line}", quote,
                                         f"Line-anchored twin: {name} line reads {quote}"),
                                     "twin", path, quote, line, location=f"{path}:{line}",
                                     key=key))

        def reachable(sha: str) -> bool:
            return bool(w.git("branch", "--contains", sha)) if subprocess.run(
                ["git", "-C", str(w.repo), "cat-file", "-e", f"{sha}^{{commit}}"],
                capture_output=True).returncode == 0 else False

        cwd = os.getcwd()
        rows: list[dict] = []
        totals = {"tp": 0, "fp": 0, "fn": 0, "gtp": 0, "gfp": 0, "gfn": 0,
                  "relocated_ok": 0, "relocated_n": 0, "stale_injected": 0, "stale_asked": 0,
                  "fresh_injected": 0, "fresh_asked": 0, "session_stale": 0,
                  "stp": 0, "sfp": 0, "sfn": 0, "ttp": 0, "tfp": 0, "tfn": 0,
                  "sgtp": 0, "sgfp": 0, "sgfn": 0, "sym_ok": 0, "sym_n": 0}
        plan = [(a, b, c, {}) for a, b, c in (SCRIPT[:steps] if steps else SCRIPT)]
        if code_only:
            plan = []
        if code_only or not steps:
            plan += CODE_SCRIPT
        try:
            os.chdir(w.repo)
            for n, (name, what, ops, declared) in enumerate(plan):
                for op in ops:
                    op(w)
                if name != "branch-deleted":
                    w.git("add", "-A")
                    w.git("commit", "-q", "-m", name)
                _truth(w, facts, reachable, declared)
                run_verify(client, w.repo, PROJECT)
                stored = {int(f["id"]): f for f in client.list_facts(
                    project=PROJECT, statuses=["active", "stale"])}
                judged = [f for f in facts if f.kind != "twin"]
                truth = {f.id: f.stale for f in judged}
                pred = {f.id: stored[f.id]["status"] == "stale" for f in judged}
                grep = {f.id: _grep_control(w, f) for f in judged}
                tp, fp, fn = _counts(pred, truth)
                gtp, gfp, gfn = _counts(grep, truth)
                moved_ok = [f for f in facts if f.kind == "file" and not f.stale]
                ok = sum(1 for f in moved_ok if stored[f.id]["source"]["location"] == f.location)
                # Symbol facts, and their line-anchored twins under the same truth.
                sym = [f for f in facts if f.kind == "symbol"]
                twins = [f for f in facts if f.kind == "twin"]
                stp, sfp, sfn = _counts({f.id: pred[f.id] for f in sym},
                                        {f.id: truth[f.id] for f in sym})
                sgtp, sgfp, sgfn = _counts({f.id: grep[f.id] for f in sym},
                                           {f.id: truth[f.id] for f in sym})
                ttp, tfp, tfn = _counts({f.id: stored[f.id]["status"] == "stale" for f in twins},
                                        {f.id: f.stale for f in twins})
                sym_live = [f for f in sym if not f.stale]
                sym_ok = sum(1 for f in sym_live
                             if stored[f.id]["source"]["location"] == f.location)
                injected_stale = injected_fresh = 0
                stale_facts = [f for f in judged if f.stale]
                fresh_facts = [f for f in judged if not f.stale]
                for f in stale_facts + fresh_facts:
                    # a fresh session each ask: "at most once per session" is kept in Redis,
                    # which outlives a run
                    data = client.inject("prompt", f"eval-{run}-{n}-{f.id}", project=PROJECT,
                                         prompt=stored[f.id]["content"])
                    if f.id in data["facts"]:
                        if f.stale:
                            injected_stale += 1
                        else:
                            injected_fresh += 1
                session = client.inject("session", f"eval-{run}-session-{n}", project=PROJECT)
                session_stale = sum(1 for f in stale_facts if f.id in session["facts"])
                row = {"step": name, "what": what, "stale_truth": sum(truth.values()),
                       "tp": tp, "fp": fp, "fn": fn, "grep_tp": gtp, "grep_fp": gfp,
                       "grep_fn": gfn, "relocated_ok": ok, "relocated_n": len(moved_ok),
                       "stale_injected": injected_stale, "stale_asked": len(stale_facts),
                       "fresh_injected": injected_fresh, "fresh_asked": len(fresh_facts),
                       "session_stale": session_stale,
                       "symbol_stale_truth": sum(1 for f in sym if f.stale),
                       "stp": stp, "sfp": sfp, "sfn": sfn, "ttp": ttp, "tfp": tfp, "tfn": tfn,
                       "sgtp": sgtp, "sgfp": sgfp, "sgfn": sgfn,
                       "sym_ok": sym_ok, "sym_n": len(sym_live)}
                rows.append(row)
                for k in totals:
                    src = {"gtp": "grep_tp", "gfp": "grep_fp", "gfn": "grep_fn"}.get(k, k)
                    totals[k] += row[src]
                if progress:
                    print(f"  {name}: stale {tp}/{sum(truth.values())} fp {fp} fn {fn}",
                          flush=True)
        finally:
            os.chdir(cwd)
    p, r = _pr(totals["tp"], totals["fp"], totals["fn"])
    gp, gr = _pr(totals["gtp"], totals["gfp"], totals["gfn"])
    sp, sr = _pr(totals["stp"], totals["sfp"], totals["sfn"])
    tp_, tr = _pr(totals["ttp"], totals["tfp"], totals["tfn"])
    sgp, sgr = _pr(totals["sgtp"], totals["sgfp"], totals["sgfn"])
    return {
        "facts": len(facts), "steps": rows,
        "symbols": {
            "facts": sum(1 for f in facts if f.kind == "symbol"),
            "precision": round(sp, 4), "recall": round(sr, 4),
            "location_accuracy": round(totals["sym_ok"] / totals["sym_n"], 4)
            if totals["sym_n"] else 1.0,
            "twin_precision": round(tp_, 4), "twin_recall": round(tr, 4),
            "grep_precision": round(sgp, 4), "grep_recall": round(sgr, 4),
            "tp": totals["stp"], "fp": totals["sfp"], "fn": totals["sfn"],
            "twin_tp": totals["ttp"], "twin_fp": totals["tfp"], "twin_fn": totals["tfn"],
            "grep_tp": totals["sgtp"], "grep_fp": totals["sgfp"], "grep_fn": totals["sgfn"],
        },
        "summary": {
            "stale_precision": round(p, 4), "stale_recall": round(r, 4),
            "grep_precision": round(gp, 4), "grep_recall": round(gr, 4),
            "relocation_accuracy": round(totals["relocated_ok"] / totals["relocated_n"], 4)
            if totals["relocated_n"] else 1.0,
            "stale_injected": totals["stale_injected"] + totals["session_stale"],
            "stale_asked": totals["stale_asked"],
            "fresh_injected": totals["fresh_injected"], "fresh_asked": totals["fresh_asked"],
            "tp": totals["tp"], "fp": totals["fp"], "fn": totals["fn"],
        },
        "seconds": round(time.monotonic() - started, 1),
    }


def scale(stack: Any, n_files: int = 50, per_file: int = 20) -> list[dict]:
    """Wall time of one `verify` over n_files x per_file facts, as the CLI runs it: nothing
    changed (the blob fast path), then a line inserted at the top of every file (every fact
    moves: each file read, searched, fingerprinted again), then again (fast path on the new
    fingerprints). Facts are loaded by import (with their fingerprints)."""
    from factbank_client.cli.staleness import run_verify
    from factbank_client.client import Client, new_fact
    from factbank_client.config import ClientConfig
    from factbank_client.staleness.verify import Repo, check

    w = build_world(Path(tempfile.mkdtemp(prefix="factbank-staleness-scale-")))
    for f in range(n_files):
        path = f"big/f{f}.yaml"
        w.files[path] = [f"  key_{f}_{j}: {j}" for j in range(1, per_file + 1)]
        w.write(path)
    w.git("add", "-A")
    w.git("commit", "-q", "-m", "big")
    project = PROJECT + "-scale"
    facts = [new_fact(f"In f{f} the key {j} is {j}", "project", "file", f"big/f{f}.yaml:{j}",
                      f"key_{f}_{j}: {j}", tags=["eval"], origin="verified", project=project,
                      cwd=w.repo)
             for f in range(n_files) for j in range(1, per_file + 1)]
    cfg = ClientConfig(url=stack.ingest, recall_url=stack.recall,
                       tokens={"personal": stack.token})
    rows: list[dict] = []
    with Client(cfg, agent="eval") as client:
        for _ in client.import_items(facts, chunk=500):
            pass

        def timed(name: str) -> None:
            # the client's own judging, alone (no request): the rest is listing + the route
            listed = list(client.list_facts(project=project, statuses=["active"],
                                            source_kinds=["file", "commit"]))
            t = time.perf_counter()
            repo = Repo(w.repo)
            for fact in listed:
                check(fact, repo)
            judge_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            report = run_verify(client, w.repo, project)
            ms = (time.perf_counter() - t) * 1000
            ans = report["banks"]["personal"]
            rows.append({"case": name, "facts": len(report["verdicts"]), "ms": round(ms, 1),
                         "judge_ms": round(judge_ms, 1),
                         "fresh": ans["fresh"], "moved": ans["moved"], "stale": ans["stale"]})

        timed("nothing changed")
        for path in list(w.files):
            if path.startswith("big/"):
                w.files[path].insert(0, "# moved down")
                w.write(path)
        w.git("commit", "-q", "-am", "shift")
        timed("every fact moved")
        timed("again, nothing changed")
    return rows


def format_scale(rows: list[dict]) -> str:
    out = ["| verify of | facts | wall ms | of which judging here | fresh | moved | stale |",
           "|---|---|---|---|---|---|---|"]
    out += [f"| {r['case']} | {r['facts']} | {r['ms']:.0f} | {r['judge_ms']:.0f} | "
            f"{r['fresh']} | {r['moved']} | {r['stale']} |" for r in rows]
    return "\n".join(out)


def format_table(result: dict) -> str:
    s = result["summary"]
    out = ["| step | what | stale (truth) | verify tp/fp/fn | grep tp/fp/fn | located right "
           "| stale injected | fresh injected (control) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in result["steps"]:
        out.append(f"| {r['step']} | {r['what']} | {r['stale_truth']} | "
                   f"{r['tp']}/{r['fp']}/{r['fn']} | {r['grep_tp']}/{r['grep_fp']}/"
                   f"{r['grep_fn']} | {r['relocated_ok']}/{r['relocated_n']} | "
                   f"{r['stale_injected'] + r['session_stale']}/{r['stale_asked']} | "
                   f"{r['fresh_injected']}/{r['fresh_asked']} |")
    out += ["", "| measure | verify | grep control | target |", "|---|---|---|---|",
            f"| stale precision | {s['stale_precision']:.2f} | {s['grep_precision']:.2f} | 1.00 |",
            f"| stale recall | {s['stale_recall']:.2f} | {s['grep_recall']:.2f} | 1.00 |",
            f"| relocation accuracy | {s['relocation_accuracy']:.2f} | - | 1.00 |",
            f"| stale facts injected | {s['stale_injected']} (of {s['stale_asked']} prompts + "
            f"{len(result['steps'])} session blocks) | - | 0 |",
            f"| fresh facts injected (control) | {s['fresh_injected']} of {s['fresh_asked']} "
            "prompts | - | > 0 |"]
    y = result.get("symbols")
    code = [r for r in result["steps"] if r["step"].startswith("code-")]
    if y and code:
        out += ["", f"Symbol-anchored facts ({y['facts']}; Python, TypeScript, JSX, Go, Rust), "
                "against their line-anchored twins and grep under the same truth:", "",
                "| step | symbol facts stale (truth) | symbol tp/fp/fn | line twin tp/fp/fn | "
                "grep tp/fp/fn | symbol located right |", "|---|---|---|---|---|---|"]
        out += [f"| {r['step']} | {r['symbol_stale_truth']} | {r['stp']}/{r['sfp']}/{r['sfn']} "
                f"| {r['ttp']}/{r['tfp']}/{r['tfn']} | {r['sgtp']}/{r['sgfp']}/{r['sgfn']} | "
                f"{r['sym_ok']}/{r['sym_n']} |" for r in code]
        out += ["", "| measure | symbol anchors | line twins | grep control | target |",
                "|---|---|---|---|---|",
                f"| stale precision | {y['precision']:.2f} | {y['twin_precision']:.2f} | "
                f"{y['grep_precision']:.2f} | 1.00 |",
                f"| stale recall | {y['recall']:.2f} | {y['twin_recall']:.2f} | "
                f"{y['grep_recall']:.2f} | 1.00 |",
                f"| location accuracy | {y['location_accuracy']:.2f} | - | - | 1.00 |"]
    return "\n".join(out)


def write_report(result: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "staleness.json", out / "staleness.md"
    js.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    md.write_text(
        "# Staleness eval\n\n"
        f"{result['facts']} facts over a scripted git repository ({FILES} files, "
        f"{len(result['steps'])} steps); `factbank verify` after each step, over HTTP to a "
        f"real stack; {result['seconds']} s. How it is measured: evals/staleness.py.\n\n"
        + format_table(result) + "\n"
        + ("\n## Scale\n\nOne verify as the CLI runs it (HTTP to the stack included):\n\n"
           + format_scale(result["scale"]) + "\n" if result.get("scale") else ""), "utf-8")
    return [js, md]
