"""The dashboard's misses page: how often the bank was told what it already held
(`/v1/stats/misses`, docs/misses.md). Repeats per week and project by kind and by what the
writing session had been shown, the facts involved (linked to their pages), the corrections
the prompt hook recognised, and the before/after table around a chosen date."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from litestar import Request, get
from litestar.exceptions import HTTPException
from litestar.response import Template

from factbank_client.dashboard.base import dash_of, page, pick_bank
from factbank_client.errors import FactbankError

KINDS = ("same", "correction", "equivalent", "retired")


@get("/misses", sync_to_thread=True)
def misses_page(request: Request) -> Template:
    dash = dash_of(request)
    bank = pick_bank(dash, request.query_params.get("bank"))
    raw_weeks = request.query_params.get("weeks") or "8"
    around = request.query_params.get("around") or None
    if not raw_weeks.isdigit() or not 1 <= int(raw_weeks) <= 104:
        raise HTTPException(status_code=400, detail=f"weeks: {raw_weeks!r} is not 1-104")
    if around:
        try:
            date.fromisoformat(around)
        except ValueError:
            raise HTTPException(status_code=400,
                                detail=f"around: {around!r} is not a date (YYYY-MM-DD)") from None
    weeks = int(raw_weeks)
    report, error = None, None
    try:
        report = dash.client.misses(weeks=weeks, around=around, banks=[bank])[bank]
    except FactbankError as exc:
        error = str(exc)
    per_week: dict[str, int] = {}
    if report:  # every week of the range, the empty ones too
        day = datetime.fromisoformat(report["since"]).date()
        day -= timedelta(days=day.weekday())
        while day <= datetime.fromisoformat(report["until"]).date():
            per_week[day.isoformat()] = 0
            day += timedelta(weeks=1)
    for w in (report or {}).get("weeks", []):
        per_week[w["week"]] = per_week.get(w["week"], 0) + w["repeats"]
    return page(request, "misses.html", bank=bank, weeks=weeks, around=around or "",
                report=report, failed=error, per_week=sorted(per_week.items()), kinds=KINDS)


ROUTES = [misses_page]
