"""GET /: the status page. Reads probes, their last 24 h (hourly merged sketches), SLO
statuses and active alerts, then renders service/web/templates/status.html."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from sustain.service.api.deps import SessionDep
from sustain.service.db import history
from sustain.service.db import slos as slo_queries
from sustain.service.db import status as status_queries
from sustain.service.history.windows import aligned_windows
from sustain.service.web import view

router = APIRouter(include_in_schema=False)
REFRESH_S = 30


@cache
def templates() -> Jinja2Templates:
    """Loaded on the first request, then kept (compiled templates are cached inside)."""
    return Jinja2Templates(directory=Path(__file__).parent / "templates")


@router.get("/", response_class=HTMLResponse)
async def status_page(request: Request, session: SessionDep) -> HTMLResponse:
    now = datetime.now(UTC)
    start = now - timedelta(hours=24)
    first, edge = start.timestamp(), now.timestamp()
    # hourly windows clipped to the 24 h: the partial hours at both ends are read run by run
    hours = [(max(float(a), first), min(float(b), edge))
             for a, b in aligned_windows(start, now, 3600)]
    alerts = await status_queries.active_alerts(session)
    down = view.down_states([(a.alertname, a.state, a.labels) for a in alerts])
    latest = await status_queries.latest_runs(session)
    cards = []
    for probe in await status_queries.probes(session):
        hourly = await history.aggregates(session, probe.id, hours, ["ttft", "e2e"])
        cards.append(view.probe_card(probe, latest.get(probe.id), down,
                                     view.day_figures(hourly)))
    bars = [view.slo_bar(s.name, s.objective, s.status.compliance, s.status.budget_remaining)
            for s in await slo_queries.snapshots(session, now)]
    lines = [view.alert_line(a.alertname, a.severity, a.state, a.labels, a.annotations,
                             a.fired_at or a.active_since) for a in alerts]
    return templates().TemplateResponse(request, "status.html", {
        "now": now, "cards": cards, "slos": bars, "alerts": lines, "refresh_s": REFRESH_S})
