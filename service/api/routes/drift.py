"""/api/v1/probes/{id}/drift: has a metric statistic of recent runs moved from a baseline
window (or a pinned run), by how much, and since which run. The report is
service.db.drift.drift_report, as for the alert findings; its CPU work runs in a worker
thread."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query

from sustain.probes.measure.run_sketches import MetricName
from sustain.service.api.deps import SessionDep
from sustain.service.api.filters import LocationQuery
from sustain.service.api.times import utc_or_now
from sustain.service.db import drift as drift_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Probe, Run
from sustain.service.errors import FieldError, NotFoundError
from sustain.service.history.aggregate import LATENCY_STATS
from sustain.service.history.windows import parse_duration
from sustain.service.schemas.common import MAX_DB_ID, ApiTime
from sustain.service.schemas.drift import ChangePoint, DriftRead, WindowStat
from sustain.service.schemas.patterns import duration_pattern

router = APIRouter(prefix="/probes", tags=["drift"])

ProbeId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]
MAX_SPAN_S = 90 * 86400


MAX_DURATION_S = 90 * 86400
DURATION = {"pattern": duration_pattern(MAX_DURATION_S),
            "description": "A duration of at most 90d, e.g. 24h or 7d."}


def _duration(field: str, text: str) -> int:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise FieldError(field, str(exc)) from None
    if seconds > MAX_SPAN_S:
        raise FieldError(field, "at most 90d")
    return seconds


@router.get("/{probe_id}/drift")
async def drift(
    probe_id: ProbeId,
    session: SessionDep,
    metric: MetricName = "ttft",
    stat: Annotated[str, Query(json_schema_extra={"enum": sorted(LATENCY_STATS)})] = "p99",
    window: Annotated[str, Query(max_length=16, json_schema_extra=DURATION)] = "24h",
    baseline: Annotated[str, Query(max_length=16, json_schema_extra=DURATION)] = "7d",
    baseline_run: Annotated[int | None, Query(ge=1, le=MAX_DB_ID)] = None,
    to: ApiTime | None = None,
    location: LocationQuery = None,
) -> DriftRead:
    """Compare the runs of the last `window` with the `baseline` window just before it, or
    with the run `baseline_run`, on each run's `stat` of `metric`; `location` keeps one
    location's runs (a location's own drift: its network path, its region)."""
    if stat not in LATENCY_STATS:
        raise FieldError("query.stat", f"must be one of {', '.join(sorted(LATENCY_STATS))}")
    window_s = _duration("query.window", window)
    baseline_s = _duration("query.baseline", baseline)
    if await session.get(Probe, probe_id) is None:
        raise NotFoundError("probe", probe_id)
    compared: timedelta | Run = timedelta(seconds=baseline_s)
    if baseline_run is not None:
        try:
            compared = await run_queries.get(session, baseline_run)
        except NotFoundError:
            raise FieldError("query.baseline_run", f"run {baseline_run} does not exist") \
                from None
        if compared.probe_id != probe_id:
            raise FieldError("query.baseline_run", "is a run of another probe")
    result = await drift_queries.drift_report(
        session, probe_id, metric, stat, end=utc_or_now(to),
        window=timedelta(seconds=window_s), baseline=compared, location=location)
    report, point = result.report, result.change_point
    return DriftRead(
        probe_id=probe_id, location=location, metric=metric, stat=stat,
        verdict=report.verdict,
        ratio=report.ratio, ci_low=report.ci_low, ci_high=report.ci_high,
        p_value=report.p_value, shift=report.shift,
        change_point=None if point is None else ChangePoint(
            run_id=point.run_id, scheduled_for=point.scheduled_for),
        recent=_window_stat(result.recent), baseline=_window_stat(result.baseline),
        baseline_run=baseline_run)


def _window_stat(window: drift_queries.WindowSummary) -> WindowStat:
    return WindowStat(start=window.start, end=window.end, runs=window.runs, value=window.value)
