"""compare_runs on in-memory sketch rows: run-level values from each run's merged stage
sketches, the change point placed on the run where the new level began, a pinned run as the
whole baseline. The query and the worker thread are covered on real Postgres
(tests/integration/service/test_drift_report.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from sustain.probes.measure.sketch import MetricSketch
from sustain.service.evaluation.drift_runs import SketchRow, compare_runs, run_window

END = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
RECENT_START = END - timedelta(hours=12)


def sketch(level_ms: float, rng: np.random.Generator, n: int = 200) -> bytes:
    """The serialised sketch of n lognormal values around `level_ms` (5 % spread)."""
    return MetricSketch.of(list(level_ms * rng.lognormal(0, 0.05, n))).to_bytes()


def hourly(hours: int, step_at: int, step: float) -> list[SketchRow]:
    """Hourly runs (ids 1..hours) ending at END, 100 ms; from run index `step_at` on (id
    step_at + 1), `step` times slower."""
    rng = np.random.default_rng(5)
    return [(i + 1, END - timedelta(hours=hours - i) + timedelta(minutes=10),
             sketch(100.0 * (step if i >= step_at else 1.0), rng)) for i in range(hours)]


def split(rows: list[SketchRow], at: datetime) -> tuple[list[SketchRow], list[SketchRow]]:
    """(rows scheduled before `at`, the others): baseline and recent windows."""
    return [r for r in rows if r[1] < at], [r for r in rows if r[1] >= at]


def test_the_change_point_is_the_run_where_the_new_level_began() -> None:
    base, recent = split(hourly(48, step_at=40, step=1.3), RECENT_START)
    result = compare_runs(base, recent, "p99", pinned=False)
    assert result.report.verdict == "regressed"
    assert result.change_point is not None
    assert result.change_point.run_id == 41
    assert len(result.recent.values) == 12
    assert len(result.baseline.values) == 36
    assert result.recent.value is not None
    assert result.baseline.value is not None
    assert result.recent.value > result.baseline.value


def test_a_steady_probe_has_no_change_point() -> None:
    base, recent = split(hourly(48, step_at=48, step=1.0), RECENT_START)
    result = compare_runs(base, recent, "p99", pinned=False)
    assert result.report.verdict == "no_change"
    assert result.change_point is None


def test_a_pinned_run_is_the_whole_baseline() -> None:
    rows = hourly(48, step_at=38, step=1.3)
    pinned = [r for r in rows if r[0] == 5]
    _, recent = split(rows, RECENT_START)
    result = compare_runs(pinned, recent, "p99", pinned=True)
    assert result.report.verdict == "regressed"
    assert result.report.p_value is None
    assert result.report.baseline_runs == 1
    assert [v.run_id for v in result.baseline.values] == [5]
    assert result.change_point is not None
    assert result.change_point.run_id == 39


def test_a_runs_stages_are_merged_before_its_statistic_is_taken() -> None:
    rng = np.random.default_rng(1)
    rows: list[SketchRow] = []
    for i in range(12):
        at = END - timedelta(hours=12 - i)
        # two stages per run: 100 ms and 300 ms, as many requests each; p50 of the run is
        # between them, the p50 of either stage alone is not.
        rows += [(i + 1, at, sketch(100.0, rng)), (i + 1, at, sketch(300.0, rng))]
    base, recent = split(rows, END - timedelta(hours=6))
    result = compare_runs(base, recent, "max", pinned=False)
    assert (len(result.recent.values), len(result.baseline.values)) == (6, 6)
    assert result.recent.value is not None
    assert result.recent.value > 300.0  # the max of both stages' values
    assert all(v.value > 300.0 for v in result.recent.values)

    median = run_window(recent, "p50")
    assert len(median.values) == 6
    assert all(110.0 < v.value < 290.0 for v in median.values)


def test_runs_are_ordered_oldest_first_whatever_the_row_order() -> None:
    rows = hourly(6, step_at=6, step=1.0)
    window = run_window(list(reversed(rows)), "p99")
    assert [v.run_id for v in window.values] == [1, 2, 3, 4, 5, 6]
    assert [v.scheduled_for for v in window.values] == sorted(r[1] for r in rows)


def test_without_rows_the_data_is_insufficient() -> None:
    result = compare_runs([], [], "p99", pinned=False)
    assert result.report.verdict == "insufficient_data"
    assert (result.baseline.values, result.baseline.value) == ((), None)
    assert (result.recent.values, result.recent.value) == ((), None)
    assert result.change_point is None

    pinned = compare_runs([], hourly(12, step_at=12, step=1.0), "p99", pinned=True)
    assert pinned.report.verdict == "insufficient_data"
    assert pinned.change_point is None
