"""The pages: the status page (GET /: probes, their last 24 h from hourly merged sketches, SLO
statuses and active alerts), a probe's page, a run's report and the compare page, rendered
from service/web/templates/. Each needs a viewer (unless SUSTAIN_PUBLIC_STATUS_PAGE), signed
in as signin.py says; an unknown page is a 404 page for a browser, problem+json for a
script."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.exceptions import HTTPException as StarletteHTTPException

from sustain.probes.report_tables import LOW_COUNT_CAPTION
from sustain.service.access.auth_failures import AuthFailure
from sustain.service.api.auth import (
    SESSION_COOKIE,
    authenticate_cookie,
)
from sustain.service.api.deps import SessionDep
from sustain.service.db import compare as compare_queries
from sustain.service.db import history
from sustain.service.db import runs as run_queries
from sustain.service.db import slos as slo_queries
from sustain.service.db import status as status_queries
from sustain.service.db.models import Endpoint, Probe, Run
from sustain.service.errors import FieldError
from sustain.service.history.windows import parse_duration
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.web import probe_view, report, view
from sustain.service.web.drift_view import drift_text
from sustain.service.web.jinja import templates
from sustain.service.web.signin import page_viewer, who

router = APIRouter(include_in_schema=False)
REFRESH_S = 30
COMPARE_CHOICES = 500
"""Probes the compare page's form offers at most (by name)."""


FAVICON = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
           b'<rect width="16" height="16" rx="3" fill="#1f2328"/>'
           b'<path d="M2 11 L5 8 L8 9 L14 3" stroke="#3fb950" stroke-width="2" fill="none"/>'
           b'</svg>')
"""The pages' icon (a rising line), so a browser's automatic /favicon.ico finds one."""


@router.get("/favicon.ico")
async def favicon() -> Response:
    return Response(FAVICON, media_type="image/svg+xml",
                    headers={"Cache-Control": "public, max-age=86400"})


@router.get("/", response_class=HTMLResponse)
async def status_page(request: Request, session: SessionDep,
                      page: Annotated[int, Query(ge=1, le=view.MAX_PAGE)] = 1,
                      state: Annotated[status_queries.ProbeState | None, Query()] = None
                      ) -> Response:
    """How many probes are in each state, then one page of PROBES_PER_PAGE probes, worst state
    first (`?page=2`, `?state=failing`), the active alerts and the SLOs: the page's size and
    its queries stay bounded however many probes there are."""
    viewer = await page_viewer(request)
    if viewer is None:
        return RedirectResponse("/login", status_code=303)
    now = datetime.now(UTC)
    start = now - timedelta(hours=24)
    alerts, alert_total = await status_queries.active_alerts(session, view.ALERTS_SHOWN)
    counts = await status_queries.state_counts(session)
    rows = await status_queries.probe_page(session, state, view.offset_of(page),
                                           view.PROBES_PER_PAGE)
    ids = [probe.id for probe in rows]
    latest = await status_queries.latest_runs(session, ids)
    by_location = await status_queries.latest_by_location(session, ids)
    firsts = await status_queries.first_runs_since(session, start, ids)
    searches = await capacity_probes(session, ids)
    cards = []
    for probe in rows:
        spans = view.chart_windows(max(start, firsts.get(probe.id, start)), now,
                                   probe.interval_s)
        hourly = await history.aggregates(session, probe.id, spans, ["ttft", "e2e"])
        cards.append(view.probe_card(probe, latest.get(probe.id), view.day_figures(hourly),
                                     by_location.get(probe.id), spans, now.timestamp(),
                                     capacity=probe.id in searches))
    all_bars = [view.slo_bar(s.name, s.objective, s.status.compliance,
                             s.status.budget_remaining)
                for s in await slo_queries.snapshots(session, now)]
    lines = [view.alert_line(a.alertname, a.severity, a.state, a.labels, a.annotations,
                             a.fired_at or a.active_since) for a in alerts]
    total = counts.get(state, 0) if state else sum(counts.values())
    return templates().TemplateResponse(request, "status.html", {
        "now": now, "cards": cards, "slos": view.worst_slos(all_bars),
        "slo_total": len(all_bars), "alerts": lines, "alert_total": alert_total,
        "probe_total": sum(counts.values()), "states": view.state_counts(counts),
        "paging": view.paging(page, total, state, shown=len(cards)), "refresh_s": REFRESH_S,
        "low_count": any(c.ttft_p99_low or c.e2e_p99_low for c in cards),
        "low_count_caption": LOW_COUNT_CAPTION,
        "signed_in": who(request, viewer), "nav_active": "status"})


def page_id(text: str) -> int | None:
    """A page path's database id, None for one that cannot name a row (not a number, or out
    of range): its page is a 404 like any id that names nothing."""
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if 1 <= value <= MAX_DB_ID else None


async def capacity_probes(session: AsyncSession, ids: list[int]) -> set[int]:
    """Which of the probes search for their capacity (a `capacity` load profile)."""
    if not ids:
        return set()
    found = await session.scalars(select(Probe.id).where(
        Probe.id.in_(ids), Probe.profile["kind"].astext == "capacity"))
    return set(found)


def not_found(request: Request, sentence: str, who: str | None = None,
              refresh_s: int | None = None, path: str | None = None) -> HTMLResponse:
    """A 404 page with the site's navigation that says what is missing and links back to the
    status page (`refresh_s`: it looks again that often; `path`: the page asked for)."""
    return templates().TemplateResponse(request, "not_found.html", {
        "sentence": sentence, "refresh_s": refresh_s, "path": path, "signed_in": who,
        "nav_active": None}, status_code=404)


PAGE_ACCEPT = "text/html"


def wants_page(request: Request) -> bool:
    """Whether a request that matched nothing came from a browser after a page (GET or HEAD,
    asking for HTML, outside the API): it gets the 404 page; the API and scripts keep
    problem+json."""
    path = request.url.path
    return request.method in ("GET", "HEAD") and \
        PAGE_ACCEPT in request.headers.get("accept", "") and \
        path != "/api" and not path.startswith(("/api/", "/docs/assets/"))


async def quiet_viewer(request: Request) -> str | None:
    """Who the navigation bar of a 404 page names: the signed-in key, when the session cookie
    is good; nothing else is tried, and nothing counts as a failed sign-in."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie is None:
        return None
    try:
        found = await authenticate_cookie(request.app.state.sustain, cookie)
    except Exception:  # noqa: BLE001 - a 404 page never fails over its navigation bar
        return None
    return None if isinstance(found, AuthFailure) else who(request, found)


def install_not_found_page(app: FastAPI) -> None:
    """Serve the 404 page for a browser's unknown page path (wants_page); every other HTTP
    error keeps the handler installed before (problem+json). Call after the API's error
    handlers are installed."""
    problem_handler = app.exception_handlers[StarletteHTTPException]

    async def handler(request: Request, exc: Exception) -> Response:
        if isinstance(exc, StarletteHTTPException) and exc.status_code == 404 and \
                wants_page(request):
            return not_found(request, "There is no page here.", await quiet_viewer(request),
                             path=request.url.path[:200])
        answer = problem_handler(request, exc)
        response: Response = await answer if inspect.isawaitable(answer) else answer
        return response

    app.add_exception_handler(StarletteHTTPException, handler)


@router.get("/runs/latest", response_class=HTMLResponse)
async def latest_run(request: Request, session: SessionDep,
                     probe: Annotated[str | None, Query(max_length=128)] = None) -> Response:
    """The newest finished run's page (of one probe with `?probe=NAME`): a run in flight has
    no results to show yet."""
    viewer = await page_viewer(request)
    if viewer is None:
        return RedirectResponse("/login", status_code=303)
    run_id = await status_queries.newest_finished_run(session, probe)
    if run_id is None:
        return not_found(request, "No run has finished yet"
                         + (" for that probe" if probe else "")
                         + "; this page looks again every 5 s.", who(request, viewer),
                         refresh_s=5)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_report(run_id: str, request: Request, session: SessionDep) -> Response:
    """One run as a page (the report `sustain probe --html` writes): results, the capacity or
    Pareto chart, latency percentiles and histograms, stages, errors, and for failures what
    failed, where and why (the first failed request's class, status, request and the
    server's words as its sample stored them)."""
    viewer = await page_viewer(request)
    if viewer is None:
        return RedirectResponse("/login", status_code=303)
    number = page_id(run_id)
    run = None if number is None else await session.get(Run, number)
    probe = None if run is None else await session.get(Probe, run.probe_id)
    if run is None or probe is None:
        return not_found(request, f"There is no run {run_id[:40]}.", who(request, viewer))
    endpoint = await session.get(Endpoint, probe.endpoint_id)
    ttfts, e2es = await status_queries.run_latencies(session, run.id, run.started_at)
    first = await status_queries.first_failure(session, run.id, run.started_at)
    scheduled = run.scheduled_for.astimezone(UTC)
    page = report.run_page(
        run.summary or {}, f"Run {run.id} of probe {probe.name}",
        f"model {endpoint.model if endpoint else '-'} · {run.status} · {run.location} · "
        f"scheduled {scheduled:%Y-%m-%d %H:%M:%S} UTC", ttfts, e2es,
        report.failure_lines(run.status, run.error, run.summary or {}, first,
                             endpoint.base_url if endpoint else None,
                             endpoint.api_kind if endpoint else None,
                             endpoint.model if endpoint else None,
                             detail=first.detail if first else None),
        status=run.status)
    page = report.with_probe_link(page, probe.id, probe.name)
    return HTMLResponse(report.render(page, nav={"signed_in": who(request, viewer)}))


@router.get("/probes/{probe_id}", response_class=HTMLResponse)
async def probe_page(probe_id: str, request: Request, session: SessionDep,
                     window: Annotated[str, Query(max_length=8)] = probe_view.DEFAULT_WINDOW
                     ) -> Response:
    """A probe as a page: what it measures, its latency (TTFT, TPOT, ITL, E2E), availability
    and capacity over a window (`?window=1h|24h|7d|30d`), the SLOs that cover it, its drift,
    its newest runs."""
    viewer = await page_viewer(request)
    if viewer is None:
        return RedirectResponse("/login", status_code=303)
    number = page_id(probe_id)
    probe = None if number is None else await session.get(Probe, number)
    if probe is None:
        return not_found(request, f"There is no probe {probe_id[:40]}.", who(request, viewer))
    if window not in probe_view.WINDOWS:
        window = probe_view.DEFAULT_WINDOW
    endpoint = await session.get(Endpoint, probe.endpoint_id)
    now = datetime.now(UTC)
    start = now - timedelta(seconds=probe_view.WINDOWS[window])
    firsts = await status_queries.first_runs_since(session, start, [probe.id])
    since = max(start, firsts.get(probe.id, start))
    spans = probe_view.chart_spans(since, now, probe.interval_seconds)
    windows = await history.aggregates(session, probe.id, spans, probe_view.CHART_METRICS)
    is_capacity = probe.profile.get("kind") == "capacity"
    capacity = None
    if is_capacity:
        capacity = [(at, found) for _, at, found, _, _ in await run_queries.capacity_series(
            session, probe.id, since, now, probe_view.CHART_POINTS * 4)]
    unit = "req/s" if probe.profile.get("unit") == "rate" else "users"
    charts = probe_view.probe_charts(spans, windows, capacity, since.timestamp(),
                                     now.timestamp(), unit)
    runs = [probe_view.run_line(r.id, r.status, r.location, r.scheduled_for.astimezone(UTC),
                                r.summary, r.error)
            for r in await run_queries.list_runs(session, probe_id=probe.id, status=None,
                                                 start=None, end=None, before_id=None,
                                                 limit=probe_view.RUNS_SHOWN)]
    slos = [probe_view.SloLine(slo.name, slo.objective, found.compliance,
                               found.budget_remaining)
            for slo, found in await slo_queries.covering(session, probe.name, probe.labels, now)]
    settings = request.app.state.sustain.settings
    return templates().TemplateResponse(request, "probe.html", {
        "probe": probe, "endpoint": endpoint, "profile": probe_view.describe_profile(probe.profile),
        "schedule": f"cron {probe.cron}" if probe.cron else f"every {probe.interval_seconds} s",
        "thresholds": probe_view.thresholds_text(probe.slo_ttft_ms, probe.slo_tpot_ms,
                                                 probe.slo_e2e_ms, probe.slo_ttfo_ms),
        "drift": await drift_text(session, probe.id, probe.enabled, settings),
        "window": window, "windows": list(probe_view.WINDOWS), "young": since > start,
        "since": since, "charts": charts, "slos": slos, "runs": runs,
        "low_count": any(r.low_count for r in runs), "low_count_caption": LOW_COUNT_CAPTION,
        "state": probe_view.state_text(runs),
        "refresh_s": REFRESH_S, "signed_in": who(request, viewer), "nav_active": "probe"})


COMPARE_WINDOWS = ("1h", "24h", "7d", "30d")
"""The windows the compare form offers (a URL may name any up to 400d)."""


@router.get("/compare", response_class=HTMLResponse)
async def compare_page(request: Request, session: SessionDep) -> Response:
    """Probes side by side (`?probe=A&probe=B&window=7d`): the figures of /api/v1/compare and
    each probe's newest Pareto curve, on shared axes, with the form to pick others; without
    two probes, the form and what it needs."""
    viewer = await page_viewer(request)
    if viewer is None:
        return RedirectResponse("/login", status_code=303)
    names = request.query_params.getlist("probe")
    window = request.query_params.get("window", "7d")[:16]
    context: dict[str, object] = {
        "problem": None, "found": None, "chart": None, "window": window,
        "windows": list(COMPARE_WINDOWS) + ([] if window in COMPARE_WINDOWS else [window]),
        "choices": await status_queries.probe_names(session, COMPARE_CHOICES),
        "picked": names, "probe_ids": {}, "drift": {},
        "signed_in": who(request, viewer), "nav_active": "compare"}
    template = report.environment().get_template("compare.html")
    if not names:
        return HTMLResponse(template.render(context))
    if len(names) < 2:
        context["problem"] = ("Pick at least two probes: compare sets probes side by side "
                              "(one probe's figures are on its own page).")
        return HTMLResponse(template.render(context), status_code=422)
    try:
        seconds = parse_duration(window)
        if not 0 < seconds <= 400 * 86400:
            raise ValueError(window)
        end = datetime.now(UTC)
        found = await compare_queries.compare(session, names, end - timedelta(seconds=seconds),
                                              end)
    except (ValueError, FieldError) as exc:
        context["problem"] = "; ".join(text for _, text in exc.problems) \
            if isinstance(exc, FieldError) else "window: a duration such as 24h or 7d, at most 400d"
        return HTMLResponse(template.render(context), status_code=422)
    settings = request.app.state.sustain.settings
    drift = {}
    for figures in found.probes:
        probe = await session.get(Probe, figures.probe_id)
        drift[figures.probe] = "-" if probe is None else \
            await drift_text(session, probe.id, probe.enabled, settings)
    context.update(found=found, probe_ids={p.probe: p.probe_id for p in found.probes},
                   drift=drift,
                   chart=report.pareto_chart([(p.probe, p.pareto) for p in found.probes
                                              if p.pareto]))
    return HTMLResponse(template.render(context))
