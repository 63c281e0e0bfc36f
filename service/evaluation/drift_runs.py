"""Drift over runs: stored stage sketches reduced to run-level values, compared, and the
change point placed on a run. Pure CPU work over plain data (no I/O): the caller loads the
rows and runs `compare_runs` off the event loop, since it decodes every sketch.

A run's value is the statistic (p99, mean, max...) of all its stages' sketches merged, never
an average of per-stage statistics; a window's value is the statistic of all its sketches
merged. Latency values are in ms, like the sketches."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sustain.probes.measure import sketch_record
from sustain.probes.measure.sketch import SketchData, SketchMerger
from sustain.service.evaluation.drift import DriftReport, detect, detect_against
from sustain.service.history.aggregate import latency_stat

SketchRow = tuple[int, datetime, SketchData]
"""(run id, scheduled_for, a stored MetricSketch of one stage of that run, in ms)."""
RecordRow = tuple[int, datetime, bytes]
"""(run id, scheduled_for, the run's sketch record: sustain.probes.measure.sketch_record)."""


def metric_rows(records: Sequence[RecordRow], metric: str) -> list[SketchRow]:
    """The `metric` sketches of each run's record, a row per stage, in the records' order.
    CPU-bound (decodes every record): off the event loop."""
    wanted = {metric}
    return [(run_id, at, packed) for run_id, at, record in records
            for _, _, packed in sketch_record.unpack(record, wanted)]


@dataclass(frozen=True, slots=True)
class RunValue:
    """One run's statistic."""

    run_id: int
    scheduled_for: datetime
    value: float
    """The run's statistic, in the metric's unit (ms); always > 0."""


@dataclass(frozen=True, slots=True)
class RunWindow:
    """One side of the comparison, reduced."""

    values: tuple[RunValue, ...]
    """Each run's statistic (ms), oldest run first (by scheduled_for, then id); runs without
    a value > 0 left out."""
    value: float | None
    """The statistic of all the window's sketches merged (ms); None without samples."""


@dataclass(frozen=True, slots=True)
class RunComparison:
    """The verdict on the recent runs against the baseline ones, and what it was made from."""

    report: DriftReport
    baseline: RunWindow
    recent: RunWindow
    change_point: RunValue | None
    """The first run of the new level (in baseline + recent), when there is a finding."""


def run_window(rows: Sequence[SketchRow], stat: str) -> RunWindow:
    """The window of `rows` (any order; a run's stages may be several rows) on `stat`, a
    latency statistic (sustain.service.history.aggregate.LATENCY_STATS). CPU-bound: decodes
    every sketch."""
    per_run: defaultdict[tuple[datetime, int], SketchMerger] = defaultdict(SketchMerger)
    for run_id, scheduled_for, data in rows:
        per_run[(scheduled_for, run_id)].add(data)
    everything = SketchMerger()
    values = []
    for (scheduled_for, run_id), merger in sorted(per_run.items()):
        everything.merge(merger)
        value = latency_stat(merger.result(), stat).value
        if value is not None and value > 0:
            values.append(RunValue(run_id, scheduled_for, value))
    return RunWindow(tuple(values), latency_stat(everything.result(), stat).value)


def compare_runs(base_rows: Sequence[SketchRow], recent_rows: Sequence[SketchRow], stat: str,
                 *, pinned: bool) -> RunComparison:
    """Compare the recent runs' `stat` (ms) with the baseline runs' (`detect`), or, when
    `pinned`, with the one run of `base_rows` (`detect_against`; its first run if there are
    more, insufficient data if it has no value). The change point, an index into baseline +
    recent values, is returned as that run. CPU-bound: for a worker thread."""
    base = run_window(base_rows, stat)
    recent = run_window(recent_rows, stat)
    reference = base.values[:1] if pinned else base.values
    values = [v.value for v in recent.values]
    if pinned:
        report = detect_against(reference[0].value if reference else 0.0, values)
    else:
        report = detect([v.value for v in reference], values)
    combined = [*reference, *recent.values]
    point = None
    if report.change_index is not None and report.change_index < len(combined):
        point = combined[report.change_index]
    return RunComparison(report, base, recent, point)
