"""GET /: the status page. Reads probes, their last 24 h (hourly merged sketches), SLO
statuses and active alerts, then renders service/web/templates/status.html.

The page needs a viewer (unless SUSTAIN_PUBLIC_STATUS_PAGE): a person signs in at /login with a
key through a form and gets an HttpOnly, SameSite=Strict session cookie; the key never appears in
a URL. Scripts, bearer keys work too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi import Path as FastPath
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from sustain.service.api.auth import (
    ANONYMOUS_VIEWER,
    PRINCIPAL_SCOPE_KEY,
    SESSION_COOKIE,
    Principal,
    principal_for_cookie,
    principal_for_key,
)
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.config import Settings
from sustain.service.db import compare as compare_queries
from sustain.service.db import history
from sustain.service.db import keys as key_queries
from sustain.service.db import slos as slo_queries
from sustain.service.db import status as status_queries
from sustain.service.db.models import Endpoint, Probe, Run
from sustain.service.domain.keys import bearer_token, key_hash
from sustain.service.errors import FieldError
from sustain.service.history.windows import parse_duration
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.web import report, view

router = APIRouter(include_in_schema=False)
REFRESH_S = 30


@cache
def templates() -> Jinja2Templates:
    """Loaded on the first request, then kept (compiled templates are cached inside)."""
    return Jinja2Templates(directory=Path(__file__).parent / "templates")


MAX_FORM_BYTES = 4096


async def page_viewer(request: Request) -> Principal | None:
    """Who is looking at the page: anyone when it is public, else a bearer key or a sign-in."""
    replica = request.app.state.sustain
    if replica.settings.public_status_page or replica.settings.anonymous_read:
        return ANONYMOUS_VIEWER
    header = request.headers.get("authorization")
    if header is not None:
        token = bearer_token(header)
        return None if token is None else await principal_for_key(replica, token)
    return await principal_for_cookie(replica, request.cookies.get(SESSION_COOKIE))


def _login_form(request: Request, error: str | None, status_code: int) -> HTMLResponse:
    return templates().TemplateResponse(request, "login.html", {"error": error},
                                        status_code=status_code)


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> HTMLResponse:
    return _login_form(request, None, 200)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, state: StateDep) -> Response:
    """Check the key from the form; on success a session cookie and a redirect to the page."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return _login_form(request, "The form is too large.", 413)
    keys = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4).get("key") or [""]
    key = keys[0].strip()
    principal = await principal_for_key(state, key) if key else None
    if principal is None:
        return _login_form(request, "That key was not accepted.", 401)
    request.scope[PRINCIPAL_SCOPE_KEY] = principal
    async with state.sessions() as session:
        lifetime = timedelta(hours=state.settings.session_hours)
        token = await key_queries.open_session(session, key_hash(key), datetime.now(UTC),
                                               lifetime)
        await session.commit()
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(SESSION_COOKIE, token, max_age=int(lifetime.total_seconds()),
                        path="/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https" or _https(state.settings))
    return response


def _https(settings: Settings) -> bool:
    """Whether users reach the service over TLS (then the cookie is Secure)."""
    return (settings.external_url or "").startswith("https://")


@router.post("/logout")
async def logout(request: Request, state: StateDep) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token and len(token) <= 128:
        async with state.sessions() as session:
            await key_queries.close_session(session, token)
            await session.commit()
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/", response_class=HTMLResponse)
async def status_page(request: Request, session: SessionDep) -> Response:
    viewer = await page_viewer(request)
    if viewer is None:
        return RedirectResponse("/login", status_code=303)
    now = datetime.now(UTC)
    start = now - timedelta(hours=24)
    alerts = await status_queries.active_alerts(session)
    down = view.down_states([(a.alertname, a.state, a.labels) for a in alerts])
    latest = await status_queries.latest_runs(session)
    firsts = await status_queries.first_runs_since(session, start)
    cards = []
    for probe in await status_queries.probes(session):
        spans = view.chart_windows(max(start, firsts.get(probe.id, start)), now,
                                   probe.interval_s)
        hourly = await history.aggregates(session, probe.id, spans, ["ttft", "e2e"])
        cards.append(view.probe_card(probe, latest.get(probe.id), down,
                                     view.day_figures(hourly)))
    bars = [view.slo_bar(s.name, s.objective, s.status.compliance, s.status.budget_remaining)
            for s in await slo_queries.snapshots(session, now)]
    lines = [view.alert_line(a.alertname, a.severity, a.state, a.labels, a.annotations,
                             a.fired_at or a.active_since) for a in alerts]
    return templates().TemplateResponse(request, "status.html", {
        "now": now, "cards": cards, "slos": bars, "alerts": lines, "refresh_s": REFRESH_S,
        "signed_in": None if viewer is ANONYMOUS_VIEWER else viewer.name})


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_report(run_id: Annotated[int, FastPath(ge=1, le=MAX_DB_ID)], request: Request,
                     session: SessionDep) -> Response:
    """One run as a page (the report `sustain probe --html` writes): results, the capacity or
    Pareto chart, latency percentiles and histograms, stages, errors."""
    if await page_viewer(request) is None:
        return RedirectResponse("/login", status_code=303)
    run = await session.get(Run, run_id)
    probe = None if run is None else await session.get(Probe, run.probe_id)
    if run is None or probe is None:
        return HTMLResponse("<!doctype html><title>no such run</title><p>No such run.</p>",
                            status_code=404)
    endpoint = await session.get(Endpoint, probe.endpoint_id)
    ttfts, e2es = await status_queries.run_latencies(session, run.id, run.started_at)
    scheduled = run.scheduled_for.astimezone(UTC)
    page = report.run_page(
        run.summary or {}, f"Run {run.id} of probe {probe.name}",
        f"model {endpoint.model if endpoint else '-'} · {run.status} · scheduled "
        f"{scheduled:%Y-%m-%d %H:%M:%S} UTC" + (f" · {run.error}" if run.error else ""),
        ttfts, e2es)
    return HTMLResponse(report.render(page))


@router.get("/compare", response_class=HTMLResponse)
async def compare_page(request: Request, session: SessionDep) -> Response:
    """Probes side by side (`?probe=A&probe=B&window=7d`): the figures of /api/v1/compare and
    each probe's newest Pareto curve, on shared axes."""
    if await page_viewer(request) is None:
        return RedirectResponse("/login", status_code=303)
    names = request.query_params.getlist("probe")
    window = request.query_params.get("window", "7d")
    try:
        seconds = parse_duration(window)
        if not 0 < seconds <= 400 * 86400:
            raise ValueError(window)
        end = datetime.now(UTC)
        found = await compare_queries.compare(session, names, end - timedelta(seconds=seconds),
                                              end)
    except (ValueError, FieldError) as exc:
        message = "; ".join(text for _, text in exc.problems) if isinstance(exc, FieldError) \
            else "window: a duration such as 24h or 7d, at most 400d"
        return HTMLResponse(report.environment().get_template("compare.html").render(
            problem=message, found=None, chart=None, window=window), status_code=422)
    chart = report.pareto_chart([(p.probe, p.pareto) for p in found.probes if p.pareto])
    return HTMLResponse(report.environment().get_template("compare.html").render(
        problem=None, found=found, chart=chart, window=window))
