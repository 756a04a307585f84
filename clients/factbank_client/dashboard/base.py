"""What every page of the dashboard shares: the per-process state (`Dash`: the client, the
banks, short caches, the eval runs), the page and redirect helpers and the helpers the
templates use."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from litestar import Request
from litestar.exceptions import HTTPException, NotFoundException
from litestar.response import Redirect, Template

from factbank_client import render
from factbank_client.client import Client
from factbank_client.config import ClientConfig
from factbank_client.dashboard import security
from factbank_client.errors import FactbankError
from factbank_common.schema import SOURCE_KINDS

HERE = Path(__file__).parent

PAGE_SIZE = 25

# The live timeline asks the services for new events this often (each bank, one query on an
# indexed (bank, at) range): the page shows a new event within ~2 s.
POLL_SECONDS = 2.0

CATEGORIES_TTL = 60.0

SCOPES_TTL = 60.0

STATUSES = ("active", "stale", "superseded", "deleted")


class Dash:
    """What every handler shares: the client over the configured banks, and small caches of
    what changes rarely (each bank's scopes and categories), so a page costs its own calls."""

    def __init__(self, config: ClientConfig, keys: security.Secrets, *,
                 evals_dir: Path | None = None, home: Path | None = None,
                 dispatch_dir: Path | None = None,
                 dispatch_env: dict[str, str] | None = None,
                 dispatch_binaries: dict[str, str] | None = None) -> None:
        self.config = config
        self.dispatch_binaries = dispatch_binaries
        # Dispatch (dispatch_page.py): where runs are kept (None: the library's default), the
        # harnesses' environment (None: this process's), the repository the form suggests.
        self.dispatch_dir = dispatch_dir
        self.dispatch_env = dispatch_env
        self.default_repo = os.getcwd()
        self.runs_store: Any = None
        self.keys = keys
        self.http = httpx.Client(timeout=httpx.Timeout(30.0, connect=3.0))
        self.client = Client(config, agent="dashboard", http=self.http, session="")
        self.evals_dir = evals_dir
        self.home = home
        self._cache: dict[tuple, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self.runs: dict[str, EvalRun] = {}
        self._stamp = _stamp(config.path)

    def refresh(self) -> None:
        """Read the config file again when it changed since the last request: a bank logged in
        after the dashboard started answered 404. One stat per request; a config
        that no longer parses keeps the last good one."""
        stamp = _stamp(self.config.path)
        if stamp == self._stamp or self.config.path is None:
            return
        from factbank_client import config as client_config

        try:
            config = client_config.load(self.config.path)
        except (OSError, ValueError):
            return
        with self._lock:
            self.config, self._stamp = config, stamp
            self.client = Client(config, agent="dashboard", http=self.http, session="")
            self._cache.clear()  # scopes and categories were the old tokens'

    @property
    def banks(self) -> list[str]:
        return self.config.banks

    def cached(self, key: tuple, ttl: float, fn: Callable[[], Any]) -> Any:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit and now - hit[0] < ttl:
                return hit[1]
        value = fn()
        with self._lock:
            self._cache[key] = (now, value)
        return value

    def scopes(self, bank: str) -> list[str]:
        """The bank token's scopes (GET /v1/whoami); [] when the bank cannot be reached."""
        def ask() -> list[str]:
            try:
                return list(self.client.whoami(bank)["scopes"])
            except FactbankError:
                return []
        return self.cached(("scopes", bank), SCOPES_TTL, ask)

    def categories(self, bank: str) -> list[dict]:
        def ask() -> list[dict]:
            try:
                return self.client.categories(banks=[bank])[bank]
            except FactbankError:
                return []
        return self.cached(("categories", bank), CATEGORIES_TTL, ask)


def _stamp(path: Path | None) -> tuple[int, int] | None:
    try:
        st = path.stat() if path is not None else None
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size) if st else None


def dash_of(request: Request) -> Dash:
    dash = request.app.state.dash
    dash.refresh()
    return dash


def pick_bank(dash: Dash, bank: str | None) -> str:
    if not dash.banks:
        raise HTTPException(status_code=503, detail="no bank configured: run factbank login")
    if bank in (None, ""):
        return dash.banks[0]
    if bank not in dash.banks:
        raise NotFoundException(f"no bank {bank!r} is configured here")
    return bank


def page(request: Request, name: str, **context: Any) -> Template:
    dash = dash_of(request)
    return Template(template_name=name, context={
        "csrf": dash.keys.csrf, "banks": dash.banks, "nav": name.split(".")[0],
        "dispatch_enabled": True,
        "flash": request.query_params.get("done"), "error": request.query_params.get("error"),
        **context})


def back(url: str, **params: str) -> Redirect:
    """A 303 to `url` on this dashboard (never elsewhere: security.local_url), with `params`
    (a flash message, an error) in its query."""
    query = urlencode({k: v for k, v in params.items() if v})
    return Redirect(security.local_url(url + (("&" if "?" in url else "?") + query
                                              if query else "")), status_code=303)


def sparkline(values: Sequence[float], width: int = 320, height: int = 56) -> dict:
    """An inline SVG trust line: points in a 0..1 band (trust is a probability-like score),
    so two facts' lines compare by height at a glance."""
    vals = [max(0.0, min(1.0, float(v))) for v in values] or [0.0]
    if len(vals) == 1:
        vals = vals * 2
    step = width / (len(vals) - 1)
    pad = 4
    pts = [(round(i * step, 1), round(pad + (1 - v) * (height - 2 * pad), 1))
           for i, v in enumerate(vals)]
    return {"width": width, "height": height,
            "points": " ".join(f"{x},{y}" for x, y in pts), "last": pts[-1]}


def trust_class(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "t-none"
    return "t-high" if v >= 0.75 else "t-mid" if v >= 0.5 else "t-low"


def source_href(fact: Mapping) -> str | None:
    """A link for a URL source, and for a commit of a GitHub/GitLab/Codeberg project."""
    src = fact.get("source") or {}
    loc = str(src.get("location") or "")
    if src.get("kind") == "url" and loc.startswith(("https://", "http://")):
        return loc
    project = str(fact.get("project") or "")
    if src.get("kind") == "commit" and loc and project.startswith(
            ("github.com/", "gitlab.com/", "codeberg.org/")):
        sha = loc.split()[0].split(":")[-1]
        if all(c in "0123456789abcdef" for c in sha.lower()) and 7 <= len(sha) <= 64:
            return f"https://{project}/commit/{sha}"
    return None


def age(at: Any) -> str:
    return render.ago(str(at) if at else None, datetime.now(UTC))


def template_globals() -> dict[str, Any]:
    return {"trust_class": trust_class, "source_href": source_href, "age": age,
            "when": render.when, "matched_question": render.matched_question,
            "confirmed": render.confirmed,
            "timeline_what": render.timeline_what, "short": render.short,
            "sparkline": sparkline, "STATUSES": STATUSES, "SOURCE_KINDS": SOURCE_KINDS}


def list_params(request: Request) -> dict[str, str]:
    q = request.query_params
    return {k: (q.get(k) or "").strip() for k in
            ("bank", "q", "category", "project", "status", "tag", "after")}


async def form_fields(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: str(v) for k, v in form.items() if k != security.CSRF_FIELD}


def form_tags(form: Mapping[str, str]) -> list[str]:
    """The form's comma-separated `tags` field as a list; one reading for every page's form,
    so a fact's tags come out the same whether edited, superseded or accepted from the queue."""
    return [t.strip() for t in form.get("tags", "").split(",") if t.strip()]


class EvalRun:
    """`factbank eval agent-memory` in a child process against a throwaway stack; its output
    is kept in memory (and streamed to the page) until the dashboard exits."""

    def __init__(self, run_id: str, argv: list[str], env: dict[str, str]) -> None:
        self.id = run_id
        self.argv = argv
        self.lines: list[str] = []
        self.code: int | None = None
        self.started = datetime.now(UTC)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, bufsize=1)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            # tqdm redraws with \r: keep the latest state of each line
            self.lines.append(line.rstrip("\n").split("\r")[-1])
        self.code = self.proc.wait()
