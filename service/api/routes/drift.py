"""/api/v1/probes/{id}/drift: has a metric statistic of recent runs moved from a baseline
window (or a pinned run), by how much, and since which run."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query

from sustain.probes.measure.run_sketches import MetricName
from sustain.service.api.deps import SessionDep
from sustain.service.api.schemas.common import MAX_DB_ID
from sustain.service.api.schemas.drift import ChangePoint, DriftRead, WindowStat
from sustain.service.api.times import utc_or_now
from sustain.service.db import drift as drift_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Probe
from sustain.service.errors import FieldError, NotFoundError
from sustain.service.evaluation.drift import detect, detect_against
from sustain.service.history.aggregate import LATENCY_STATS, latency_stat
from sustain.service.history.windows import parse_duration

router = APIRouter(prefix="/probes", tags=["drift"])

ProbeId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]
MAX_SPAN_S = 90 * 86400


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
    stat: str = "p99",
    window: Annotated[str, Query(max_length=16)] = "24h",
    baseline: Annotated[str, Query(max_length=16)] = "7d",
    baseline_run: Annotated[int | None, Query(ge=1, le=MAX_DB_ID)] = None,
    to: datetime | None = None,
) -> DriftRead:
    """Compare the runs of the last `window` with the `baseline` window just before it, or
    with the run `baseline_run`, on each run's `stat` of `metric`."""
    if stat not in LATENCY_STATS:
        raise FieldError("query.stat", f"must be one of {', '.join(sorted(LATENCY_STATS))}")
    window_s = _duration("query.window", window)
    baseline_s = _duration("query.baseline", baseline)
    if await session.get(Probe, probe_id) is None:
        raise NotFoundError("probe", probe_id)
    end = utc_or_now(to)
    start = end - timedelta(seconds=window_s)
    recent, recent_sketch = await drift_queries.run_values(session, probe_id, metric, stat,
                                                           start, end)
    values = [v.value for v in recent]
    if baseline_run is not None:
        try:
            pinned = await run_queries.get(session, baseline_run)
        except NotFoundError:
            raise FieldError("query.baseline_run", f"run {baseline_run} does not exist") \
                from None
        if pinned.probe_id != probe_id:
            raise FieldError("query.baseline_run", "is a run of another probe")
        reference, reference_sketch = await drift_queries.run_values(
            session, probe_id, metric, stat, pinned.scheduled_for,
            pinned.scheduled_for + timedelta(microseconds=1))
        ref_value = reference[0].value if reference else 0.0
        report = detect_against(ref_value, values)
        combined = [*reference, *recent]
        base = WindowStat(start=None, end=None, runs=len(reference),
                          value=latency_stat(reference_sketch, stat).value)
    else:
        base_start = start - timedelta(seconds=baseline_s)
        before, base_sketch = await drift_queries.run_values(session, probe_id, metric, stat,
                                                             base_start, start)
        report = detect([v.value for v in before], values)
        combined = [*before, *recent]
        base = WindowStat(start=base_start, end=start, runs=len(before),
                          value=latency_stat(base_sketch, stat).value)
    point = None
    if report.change_index is not None and report.change_index < len(combined):
        run = combined[report.change_index]
        point = ChangePoint(run_id=run.run_id, scheduled_for=run.scheduled_for)
    return DriftRead(
        probe_id=probe_id, metric=metric, stat=stat, verdict=report.verdict,
        ratio=report.ratio, ci_low=report.ci_low, ci_high=report.ci_high,
        p_value=report.p_value, shift=report.shift, change_point=point,
        recent=WindowStat(start=start, end=end, runs=len(recent),
                          value=latency_stat(recent_sketch, stat).value),
        baseline=base, baseline_run=baseline_run)
