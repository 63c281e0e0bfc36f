"""Run-level values of a metric statistic for drift: each finished run's stages merged into
one sketch, then the statistic of that sketch, oldest run first."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from probes.measure.sketch import MetricSketch, SketchMerger
from service.db.models import Run, RunSketch
from service.history.aggregate import latency_stat


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
