"""/api/v1/probes/{id}/series and /summary: history of a probe from merged sketches and
summed counts."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query

from sustain.probes.measure.run_sketches import MetricName
from sustain.service.api.deps import SessionDep
from sustain.service.api.filters import LocationQuery
from sustain.service.api.times import utc_or_now
from sustain.service.db import history, summaries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Probe
from sustain.service.errors import FieldError, NotFoundError
from sustain.service.history.aggregate import (
    LATENCY_STATS,
    SKETCHED_COUNTS,
    Stat,
    count_stat,
    latency_stat,
)
from sustain.service.history.windows import (
    MAX_POINTS,
    aligned_windows,
    at,
    parse_duration,
    point_count,
)
from sustain.service.schemas.common import MAX_DB_ID, ApiTime
from sustain.service.schemas.history import (
    CapacityPoint,
    CapacitySeries,
    Series,
    SeriesPoint,
    WindowSummary,
)
from sustain.service.schemas.patterns import DURATION_MAX_NUMBER, DURATION_UNITS_S, duration_pattern

router = APIRouter(prefix="/probes", tags=["history"])

ProbeId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]
MAX_WINDOW_S = 400 * 86400
WINDOW = {"pattern": duration_pattern(MAX_WINDOW_S),
          "description": "A duration of at most 400d, e.g. 24h or 7d."}
STEP = {"pattern": duration_pattern(DURATION_MAX_NUMBER * DURATION_UNITS_S["w"]),
        "description": f"A duration, e.g. 1h or 1d; at most {MAX_POINTS:,} steps from `from` "
        "to `to`."}

UNITS = {"availability": "ratio", "request_throughput": "requests/s",
         "output_token_throughput": "tokens/s", "goodput": "requests/s",
         "item_throughput": "items/s", "retrieval_hit_rate": "ratio"}
METRIC_UNITS = {"output_tokens": "tokens", "quality": "score (1 passed, 2 failed)",
                "items": "items", "rtf": "ratio (processing time / audio time)",
                "retrieval": "score (1 hit, 2 missed)",
                "reasoning_share": "1 + reasoning share (1: no thinking, 2: all thinking)"}
"""Sketched metrics that are not latencies in ms."""


def _duration(field: str, text: str) -> int:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise FieldError(field, str(exc)) from None


async def _check_probe(session: SessionDep, probe_id: int) -> None:
    if await session.get(Probe, probe_id) is None:
        raise NotFoundError("probe", probe_id)


@router.get("/{probe_id}/series", response_model_exclude_none=False)
async def series(
    probe_id: ProbeId,
    session: SessionDep,
    metric: MetricName = "ttft",
    stat: Stat = "p99",
    from_: Annotated[ApiTime | None, Query(alias="from")] = None,
    to: ApiTime | None = None,
    step: Annotated[str, Query(max_length=16, json_schema_extra=STEP)] = "1h",
    location: LocationQuery = None,
) -> Series:
    """One point per step (windows aligned on multiples of the step since the Unix epoch, UTC)
    from merged sketches or summed counts. `from` defaults to 24 h before `to` (now);
    `location` keeps one location's runs (default: every location's together)."""
    step_s = _duration("query.step", step)
    end = utc_or_now(to)
    start = from_ if from_ is not None else end - timedelta(days=1)
    if start >= end:
        raise FieldError("query.from", "must be before `to`")
    points = point_count(start, end, step_s)
    if points > MAX_POINTS:
        raise FieldError("query.step", f"gives {points} points from `from` to `to`; at most "
                         f"{MAX_POINTS} are allowed, use a larger step")
    await _check_probe(session, probe_id)
    windows = aligned_windows(start, end, step_s)
    metrics = [metric] if stat in LATENCY_STATS else \
        [SKETCHED_COUNTS[stat]] if stat in SKETCHED_COUNTS else []
    aggregates = await history.aggregates(session, probe_id, windows, metrics, location)
    result = []
    for (a, b), agg in zip(windows, aggregates, strict=True):
        if agg.runs == 0:
            continue
        value = latency_stat(agg.sketch(metric), stat) if stat in LATENCY_STATS \
            else count_stat(agg, stat)
        result.append(SeriesPoint(start=at(a), end=at(b), value=value.value, count=value.count,
                                  runs=agg.runs, low_count=value.low_count))
    return Series(probe_id=probe_id, location=location, metric=metric, stat=stat,
                  unit=UNITS.get(stat, METRIC_UNITS.get(metric, "ms")),
                  step_s=step_s, from_=start, to=end, points=result)


@router.get("/{probe_id}/summary")
async def summary(
    probe_id: ProbeId,
    session: SessionDep,
    window: Annotated[str, Query(max_length=16, json_schema_extra=WINDOW)] = "24h",
    to: ApiTime | None = None,
    location: LocationQuery = None,
) -> WindowSummary:
    """Merged percentiles of every metric, availability and throughputs over [to - window,
    to), with their counts, and run-to-run stability (coefficient of variation of each run's
    p50 and p99 TTFT and TPOT and its throughput, with a band). `to` defaults to now."""
    window_s = _duration("query.window", window)
    if window_s > MAX_WINDOW_S:
        raise FieldError("query.window", "at most 400d (the run retention's maximum)")
    end = utc_or_now(to)
    start = end - timedelta(seconds=window_s)
    await _check_probe(session, probe_id)
    return await summaries.window_summary(session, probe_id, start, end, location)


@router.get("/{probe_id}/capacity")
async def capacity(
    probe_id: ProbeId,
    session: SessionDep,
    from_: Annotated[ApiTime | None, Query(alias="from")] = None,
    to: ApiTime | None = None,
    location: LocationQuery = None,
) -> CapacitySeries:
    """A capacity probe's capacity under its SLO, run by run: the highest level that met it
    (0: none did) and the output tokens per second there; `from` defaults to 7 days before
    `to` (now). At most the newest 10,000 runs."""
    end = utc_or_now(to)
    start = utc_or_now(from_) if from_ is not None else end - timedelta(days=7)
    if start >= end:
        raise FieldError("query.from", "must be before `to`")
    await _check_probe(session, probe_id)
    rows = await run_queries.capacity_series(session, probe_id, start, end, 10_000, location)
    return CapacitySeries(probe_id=probe_id, location=location, points=[
        CapacityPoint(run_id=run_id, scheduled_for=at, capacity=level or 0, system_tps=tps,
                      location=where)
        for run_id, at, level, tps, where in rows])
