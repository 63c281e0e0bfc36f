"""The drift report of a probe's metric statistic, the one path the REST route and the alert
findings share: load each finished run's sketches of the windows (SQL, on the event loop),
then reduce them to run-level values, compare and place the change point on a run
(sustain.service.evaluation.drift_runs.compare_runs: decoding sketches and the statistics are
CPU work, run in a worker thread, never on the event loop). Also the stored findings."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure.finite import ratio
from sustain.service.db.models import DriftFinding, Probe, Run
from sustain.service.evaluation.drift import DriftReport
from sustain.service.evaluation.drift_runs import (
    RecordRow,
    RunComparison,
    RunValue,
    compare_runs,
    metric_rows,
)


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """One side of the comparison."""

    start: datetime | None
    """Window start (inclusive); None for a pinned run."""
    end: datetime | None
    """Window end (exclusive); None for a pinned run."""
    runs: int
    """Finished runs with a value > 0 for the statistic."""
    value: float | None
    """The statistic over all the window's sketches merged (ms); None without samples."""


@dataclass(frozen=True, slots=True)
class DriftResult:
    report: DriftReport
    recent: WindowSummary
    baseline: WindowSummary
    change_point: RunValue | None
    """The first run of the new level, when there is a finding."""


async def drift_report(session: AsyncSession, probe_id: int, metric: str, stat: str, *,
                       end: datetime, window: timedelta, baseline: timedelta | Run,
                       location: str | None = None) -> DriftResult:
    """Compare the runs of [end - window, end) with the `baseline` window just before it, or
    with one pinned run (a Run of this probe, checked by the caller), on each run's `stat` of
    `metric`; the runs of one `location`, or of all."""
    start = end - window
    recent_rows = await _record_rows(session, probe_id, start=start, end=end,
                                     location=location)
    if isinstance(baseline, Run):
        base_start = base_end = None
        base_rows = await _record_rows(session, probe_id, run_id=baseline.id)
    else:
        base_start, base_end = start - baseline, start
        base_rows = await _record_rows(session, probe_id, start=base_start, end=base_end,
                                       location=location)
    compared = await asyncio.to_thread(
        _compare, metric, base_rows, recent_rows, stat, pinned=isinstance(baseline, Run))
    return DriftResult(
        report=compared.report,
        recent=WindowSummary(start, end, len(compared.recent.values), compared.recent.value),
        baseline=WindowSummary(base_start, base_end, len(compared.baseline.values),
                               compared.baseline.value),
        change_point=compared.change_point)


def _compare(metric: str, base: list[RecordRow], recent: list[RecordRow], stat: str, *,
             pinned: bool) -> RunComparison:
    """compare_runs on the `metric` sketches of the records (in a worker thread)."""
    return compare_runs(metric_rows(base, metric), metric_rows(recent, metric), stat,
                        pinned=pinned)


async def _record_rows(session: AsyncSession, probe_id: int, *,
                       start: datetime | None = None, end: datetime | None = None,
                       run_id: int | None = None, location: str | None = None
                       ) -> list[RecordRow]:
    """The sketch records of the probe's finished runs scheduled in [start, end) (or of
    run `run_id`) that measured something, oldest run first; decoded by the caller, off the
    event loop."""
    where: list[ColumnElement[bool]] = [Run.probe_id == probe_id, Run.attempts.is_not(None),
                                        Run.sketches.is_not(None)]
    if start is not None:
        where.append(Run.scheduled_for >= start)
    if end is not None:
        where.append(Run.scheduled_for < end)
    if run_id is not None:
        where.append(Run.id == run_id)
    if location is not None:
        where.append(Run.location == location)
    rows = await session.execute(
        select(Run.id, Run.scheduled_for, Run.sketches)
        .where(*where)
        .order_by(Run.scheduled_for, Run.id))
    return [(row_id, at, bytes(record)) for row_id, at, record in rows if record is not None]


async def window_records(session: AsyncSession, probe_id: int, start: datetime,
                         end: datetime, location: str | None = None) -> list[RecordRow]:
    """The sketch records of the probe's finished runs scheduled in [start, end) (in one
    location, or in all), for `drift_runs.metric_rows` off the event loop."""
    return await _record_rows(session, probe_id, start=start, end=end, location=location)


async def run_throughputs(session: AsyncSession, probe_id: int, start: datetime,
                          end: datetime, location: str | None = None) -> list[float]:
    """Each finished run's output tokens per second of measured time, oldest first."""
    rows = await session.execute(
        select(Run.output_tokens, Run.measured_s)
        .where(Run.probe_id == probe_id, Run.scheduled_for >= start, Run.scheduled_for < end,
               Run.attempts.is_not(None), Run.measured_s > 0,
               *([] if location is None else [Run.location == location]))
        .order_by(Run.scheduled_for, Run.id))
    return [rate for tokens, seconds in rows if tokens and seconds is not None
            and (rate := ratio(float(tokens), float(seconds))) is not None]


async def save_finding(session: AsyncSession, probe_id: int, metric: str, stat: str,
                       result: DriftResult, now: datetime) -> None:
    report = result.report
    point = result.change_point
    values = {"verdict": report.verdict, "ratio": report.ratio, "ci_low": report.ci_low,
              "ci_high": report.ci_high,
              "change_at": point.scheduled_for if point is not None else None,
              "evaluated_at": now}
    await session.execute(pg_insert(DriftFinding).values(
        probe_id=probe_id, metric=metric, stat=stat, **values).on_conflict_do_update(
        index_elements=["probe_id", "metric", "stat"], set_=values))


async def findings(session: AsyncSession, probe_id: int | None = None
                   ) -> list[tuple[str, DriftFinding]]:
    """(probe name, finding) of every enabled probe, or of the one with `probe_id`."""
    rows = await session.execute(
        select(Probe.name, DriftFinding).join(Probe, Probe.id == DriftFinding.probe_id)
        .where(Probe.enabled, *([] if probe_id is None else [Probe.id == probe_id]))
        .order_by(Probe.name, DriftFinding.metric, DriftFinding.stat))
    return [(name, finding) for name, finding in rows.all()]


async def ratios(session: AsyncSession) -> list[tuple[str, str, str, float]]:
    """(probe, metric, stat, ratio) of every finding with a ratio (sustain_drift_ratio)."""
    return [(name, f.metric, f.stat, f.ratio) for name, f in await findings(session)
            if f.ratio is not None]


async def last_evaluated(session: AsyncSession) -> datetime | None:
    return (await session.execute(select(func.max(DriftFinding.evaluated_at)))).scalar()


async def window_runs(session: AsyncSession, probe_id: int, start: datetime, end: datetime
                      ) -> tuple[int, int]:
    """The probe's finished runs scheduled in [start, end), and those of them with an E2E
    sketch (a successful request: a latency value a drift test can compare), for saying
    why a finding has no verdict."""
    measured = Run.successes > 0
    row = (await session.execute(
        select(func.count(), func.count().filter(measured))
        .select_from(Run)
        .where(Run.probe_id == probe_id, Run.attempts.is_not(None),
               Run.scheduled_for >= start, Run.scheduled_for < end))).one()
    return int(row[0]), int(row[1])
