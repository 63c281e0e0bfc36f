"""Run-level values of a metric statistic for drift: each finished run's stages merged into
one sketch, then the statistic of that sketch, oldest run first."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure.sketch import MetricSketch, SketchMerger
from sustain.service.db.models import DriftFinding, Probe, Run, RunSketch
from sustain.service.history.aggregate import latency_stat


@dataclass(frozen=True, slots=True)
class RunValue:
    run_id: int
    scheduled_for: datetime
    value: float


async def run_values(session: AsyncSession, probe_id: int, metric: str, stat: str,
                     start: datetime, end: datetime) -> tuple[list[RunValue], MetricSketch]:
    """Each finished run's statistic in [start, end), and all of them merged (for the
    window's own statistic)."""
    rows = await session.execute(
        select(Run.id, Run.scheduled_for, RunSketch.sketch)
        .join(RunSketch, RunSketch.run_id == Run.id)
        .where(Run.probe_id == probe_id, Run.scheduled_for >= start, Run.scheduled_for < end,
               Run.attempts.is_not(None), RunSketch.metric == metric)
        .order_by(Run.scheduled_for, Run.id))
    per_run: defaultdict[tuple[datetime, int], SketchMerger] = defaultdict(SketchMerger)
    everything = SketchMerger()
    for run_id, scheduled_for, data in rows:
        per_run[(scheduled_for, run_id)].add(bytes(data))
        everything.add(bytes(data))
    values = []
    for (scheduled_for, run_id), merger in sorted(per_run.items()):
        value = latency_stat(merger.result(), stat).value
        if value is not None and value > 0:
            values.append(RunValue(run_id, scheduled_for, value))
    return values, everything.result()


async def save_finding(session: AsyncSession, probe_id: int, metric: str, stat: str,
                       verdict: str, ratio: float | None, ci: tuple[float | None, float | None],
                       change_at: datetime | None, now: datetime) -> None:
    values = {"verdict": verdict, "ratio": ratio, "ci_low": ci[0], "ci_high": ci[1],
              "change_at": change_at, "evaluated_at": now}
    await session.execute(pg_insert(DriftFinding).values(
        probe_id=probe_id, metric=metric, stat=stat, **values).on_conflict_do_update(
        index_elements=["probe_id", "metric", "stat"], set_=values))


async def findings(session: AsyncSession) -> list[tuple[str, DriftFinding]]:
    """(probe name, finding) of every enabled probe."""
    rows = await session.execute(
        select(Probe.name, DriftFinding).join(Probe, Probe.id == DriftFinding.probe_id)
        .where(Probe.enabled).order_by(Probe.name, DriftFinding.metric, DriftFinding.stat))
    return [(name, finding) for name, finding in rows.all()]


async def ratios(session: AsyncSession) -> list[tuple[str, str, str, float]]:
    """(probe, metric, stat, ratio) of every finding with a ratio (sustain_drift_ratio)."""
    return [(name, f.metric, f.stat, f.ratio) for name, f in await findings(session)
            if f.ratio is not None]


async def last_evaluated(session: AsyncSession) -> datetime | None:
    return (await session.execute(select(func.max(DriftFinding.evaluated_at)))).scalar()
