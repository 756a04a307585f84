"""The health page: each service's readiness, each bank's figures and growth, the harnesses
factbank is installed in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from litestar import Request, get
from litestar.response import Template

from factbank_client.dashboard.base import dash_of, page
from factbank_client.errors import FactbankError


def _readyz(url: str, http: httpx.Client) -> dict:
    try:
        r = http.get(url + "/readyz", timeout=3.0)
        body: Any = r.json() if "json" in r.headers.get("content-type", "") else r.text
        return {"url": url, "status": r.status_code, "ok": r.status_code == 200, "body": body}
    except (httpx.HTTPError, ValueError) as exc:
        return {"url": url, "status": None, "ok": False, "body": str(exc) or type(exc).__name__}


def harnesses(home: Path | None = None) -> dict:
    """What `factbank install` wired on this machine (its manifest), how many factbank hooks
    each harness's files still hold (`installer.registered`), and whether Codex trusts
    factbank's hooks (`codex_trust.status`, which asks the codex binary when one is on PATH)."""
    from factbank_client.install import common
    from factbank_client.install import harnesses as installer

    paths = common.Paths.from_env(home=home)
    manifest = common.load_manifest(paths)
    codex: dict[str, str] | None = None
    if "codex" in manifest.get("harnesses", {}):
        try:
            from factbank_client.install import codex_trust

            codex = codex_trust.status(paths)
        except Exception as exc:  # codex missing or failing: say so, never fail the page
            codex = {"error": str(exc) or type(exc).__name__}
    wired = manifest.get("harnesses", {})
    hooks = {name: installer.registered(name, paths) for name in wired
             if name in common.HARNESSES}
    return {"manifest_path": str(paths.manifest), "harnesses": wired, "codex": codex,
            "hooks": hooks}


@get("/health", sync_to_thread=True)
def health_page(request: Request) -> Template:
    dash = dash_of(request)
    # Every call at once (two readyz, two per bank): the page waits for the slowest, not
    # the sum.
    from concurrent.futures import ThreadPoolExecutor

    def bank_entry(bank: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"label": bank}
        try:
            entry["stats"] = dash.client.stats(banks=[bank])[bank]
            entry["growth"] = dash.client.growth(bank, days=30)
        except FactbankError as exc:
            entry["error"] = str(exc)
        return entry

    with ThreadPoolExecutor(max_workers=2 + len(dash.banks)) as pool:
        ready = [pool.submit(_readyz, u, dash.http)
                 for u in (dash.config.url, dash.config.recall_url)]
        entries = [pool.submit(bank_entry, b) for b in dash.banks]
        services = [("ingest", ready[0].result()), ("recall", ready[1].result())]
        banks = [e.result() for e in entries]
    try:
        wired = harnesses(dash.home)
    except Exception as exc:  # a broken manifest is shown, not a 500
        wired = {"error": str(exc)}
    return page(request, "health.html", services=services, bank_health=banks, wired=wired)
