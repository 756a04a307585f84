"""The evals page: the latest reports, their plots, and an eval run streamed as it goes."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from litestar import Request, Response, get, post
from litestar.exceptions import NotFoundException
from litestar.response import Redirect, ServerSentEvent, Template
from litestar.response.sse import ServerSentEventMessage

from factbank_client import safefs
from factbank_client.dashboard.base import EvalRun, back, dash_of, form_fields, page
from factbank_client.errors import UnsafePath


def markdown_html(text: str) -> str:
    """The eval reports' Markdown as HTML: headings, pipe tables, fenced code and paragraphs,
    which is all `evals/report.py` writes. Every text is escaped first, so a report can carry
    no markup of its own (no Markdown library in the light client for this)."""
    from html import escape

    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre>" + escape("\n".join(lines[i + 1:j])) + "</pre>")
            i = j + 1
            continue
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(set(c) <= set("-: ") for c in cells):
                    rows.append(cells)
                i += 1
            head, *body = rows or [[]]
            out.append('<table class="md"><thead><tr>' + "".join(
                f"<th>{escape(c)}</th>" for c in head) + "</tr></thead><tbody>" + "".join(
                "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in body)
                + "</tbody></table>")
            continue
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 4)
            out.append(f"<h{level}>{escape(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{escape(line)}</p>")
        i += 1
    return "\n".join(out)


def _report_text(root: Path, path: Path) -> str | None:
    """A report's text, read only inside the reports folder (safefs: no link out of it)."""
    try:
        return safefs.read(root, path)[1].decode("utf-8", "replace")
    except (UnsafePath, OSError):
        return None


# What marks a report folder: the file `factbank eval all` writes into it
# (factbank_evals.report.write), and the one `factbank bench --out` writes.
REPORT_FILE = "report.md"
BENCH_FILE = "bench.md"


def latest_reports(root: Path | None, marker: str = REPORT_FILE,
                   limit: int | None = None) -> list[dict]:
    """The committed reports of one kind, newest first, each with its text files and plots: a
    folder holding `marker` (an eval run's report.md, or a bench's bench.md), a dated folder
    or one below it ("2026-12-06/eval"). Exploration folders beside them are neither: when
    every folder counted, a newer folder of report scripts pushed the newest eval report, and
    every plot, off the page. Folders are listed without following links (the files are read
    by safefs, inside the reports folder only). Only the newest `limit` are read and
    rendered."""
    if root is None or not root.is_dir():
        return []

    def folders(parent: Path) -> list[Path]:
        return [p for p in parent.iterdir() if p.is_dir() and not p.is_symlink()]

    dated = folders(root)
    reports = sorted((f for f in dated + [sub for d in dated for sub in folders(d)]
                      if (f / marker).is_file()),
                     key=lambda p: p.relative_to(root).parts, reverse=True)
    out = []
    for folder in reports[:limit]:
        files = sorted(folder.iterdir())
        out.append({"name": folder.relative_to(root).as_posix(),
                    "texts": [(f.name, markdown_html(text)) for f in files
                              if f.suffix == ".md" and (text := _report_text(root, f))
                              is not None],
                    "plots": [f.name for f in files if f.suffix == ".png"]})
    return out


def default_evals_dir() -> Path | None:
    """evals/reports of this checkout (the factbank_evals package's folder), found without
    importing the evals package (the light client has no numpy)."""
    import importlib.util

    spec = importlib.util.find_spec("factbank_evals")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent / "reports"


@get("/evals", sync_to_thread=True)
def evals_page(request: Request) -> Template:
    dash = dash_of(request)
    # The two newest eval reports and the newest bench.
    reports = (latest_reports(dash.evals_dir, limit=2)
               + latest_reports(dash.evals_dir, BENCH_FILE, limit=1))
    runs = sorted(dash.runs.values(), key=lambda r: r.started, reverse=True)
    return page(request, "evals.html", reports=reports, runs=runs,
                current=request.query_params.get("run"))


@get("/evals/plot/{path:path}", sync_to_thread=True)
def eval_plot(request: Request, path: str) -> Response:
    """A report's plot: `<folder>/<name>.png`, the folder one or two levels deep (as
    `latest_reports` names them)."""
    dash = dash_of(request)
    root = dash.evals_dir
    parts = path.strip("/").split("/")
    if (root is None or not 2 <= len(parts) <= 3 or not parts[-1].endswith(".png")
            or any(p in ("", ".", "..") or "\\" in p for p in parts)):
        raise NotFoundException("no such plot")
    try:  # inside the reports folder, never through a link out of it
        data = safefs.read(root, "/".join(parts))[1]
    except (UnsafePath, OSError):
        raise NotFoundException("no such plot") from None
    return Response(data, media_type="image/png")


@post("/evals/run")
async def eval_run(request: Request) -> Redirect:
    """Start `factbank eval agent-memory --per-kind N` in a child process (it brings up its
    own throwaway stack: the user's banks are never touched)."""
    dash = dash_of(request)
    form = await form_fields(request)
    try:
        per_kind = max(1, min(int(form.get("per_kind") or 20), 10_000))
    except ValueError:
        return back("/evals", error="per_kind: not a number")
    run_id = f"run{len(dash.runs) + 1}"
    argv = [sys.executable, "-m", "factbank_client.cli.main", "eval", "agent-memory",
            "--per-kind", str(per_kind)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    dash.runs[run_id] = EvalRun(run_id, argv, env)
    return back("/evals", run=run_id)


@get("/evals/run/{run_id:str}/stream")
async def eval_stream(request: Request, run_id: str) -> ServerSentEvent:
    dash = dash_of(request)
    run = dash.runs.get(run_id)
    if run is None:
        raise NotFoundException(f"no run {run_id!r}")

    async def lines() -> AsyncIterator[ServerSentEventMessage]:
        sent = 0
        while True:
            while sent < len(run.lines):
                yield ServerSentEventMessage(event="line", data=run.lines[sent])
                sent += 1
            if run.code is not None and sent >= len(run.lines):
                yield ServerSentEventMessage(event="done", data=f"exit code {run.code}")
                return
            await asyncio.sleep(0.5)

    return ServerSentEvent(lines())
