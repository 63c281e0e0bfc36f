"""No figure the evaluation computes is NaN or infinite: stability, error budgets and burn
rates, SLO status, capacity drops and drift verdicts are finite numbers, or None where they
are undefined (with the reason where the result has a place for one), for run-level values
from 0 to 1e300 and for counts from none to many. Every result goes through the strict JSON
encoder that the API uses."""

from __future__ import annotations

import math
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sustain.probes.measure.sketch import MetricSketch
from sustain.service.db.summaries import run_stability
from sustain.service.evaluation.budget import (
    bad_fraction,
    budget_remaining,
    burn_rate,
    compliance,
)
from sustain.service.evaluation.capacity_drop import (
    CapacityHistory,
    capacity_drop_candidates,
    dropped,
)
from sustain.service.evaluation.drift import (
    bootstrap_ratio,
    detect,
    detect_against,
    mann_whitney_p,
)
from sustain.service.evaluation.drift_runs import SketchRow, compare_runs
from sustain.service.evaluation.slo_status import needed_windows, status
from sustain.service.evaluation.stability import stability
from sustain.service.evaluation.tiers import DEFAULT_TIERS
from sustain.service.strict_json import dumps
from tests.unit.probes.sample_sets import HUGE_MS, PROPERTY, latencies

DRIFT = settings(PROPERTY, max_examples=15)
"""Each drift verdict draws a thousand bootstrap rounds: fewer examples."""
START = datetime(2026, 12, 1, tzinfo=UTC)

positive = st.one_of(st.sampled_from([5e-324, 1e-9, 1.0, 250.0, 1e299, HUGE_MS]),
                     st.floats(min_value=1e-3, max_value=1e4),
                     st.floats(min_value=5e-324, max_value=HUGE_MS))
"""Run-level values a drift report accepts (> 0), denormal to 1e300."""
objectives = st.one_of(st.sampled_from([0.5, 0.99, 0.999, 1 - 2**-53, 1.0]),
                       st.floats(min_value=1e-9, max_value=1.0))
"""SLO objectives, 1.0 included (no error budget at all)."""


@st.composite
def counts(draw: st.DrawFn) -> tuple[int, int]:
    """(good, total) of a window: none, all good, all bad, or anything up to a billion."""
    total = draw(st.sampled_from([0, 1, 10**9]) | st.integers(0, 10**9))
    return draw(st.sampled_from([0, total]) | st.integers(0, total)), total


# Examples of the cases that used to be infinite, NaN or crash.


def test_stability_of_runs_all_zero_has_no_cov_and_says_why() -> None:
    found = stability([0.0, 0.0, 0.0])
    assert (found.cov, found.band) == (None, None)
    assert found.reason is not None
    assert "0" in found.reason
    dumps(found.model_dump(mode="json"))


def test_stability_of_runs_near_1e300_is_the_cov_of_their_ratios() -> None:
    found = stability([0.9e300, 1e300, 1.1e300])
    assert found.cov == pytest.approx(0.1)
    assert found.reason is None


def test_stability_of_too_few_runs_says_so() -> None:
    found = stability([10.0, 10.0])
    assert found.cov is None
    assert found.reason == "2 runs: fewer than 3"


def test_stability_of_a_value_that_is_not_finite_has_no_cov() -> None:
    found = stability([10.0, math.inf, 12.0])
    assert (found.cov, found.band) == (None, None)
    assert found.reason == "a run's value is not a finite number"


def test_burn_rate_and_budget_without_an_error_budget_are_none() -> None:
    assert burn_rate(bad=1, total=10, objective=1.0) is None
    assert budget_remaining(good=9, total=10, objective=1.0) is None
    found = status(1.0, 3600, DEFAULT_TIERS, {w: (9, 10) for w in needed_windows(
        3600, DEFAULT_TIERS)})
    assert found.budget_remaining is None
    assert found.breached_tiers == []
    dumps(asdict(found))


def test_drift_of_values_near_the_float_maximum_has_finite_ratios() -> None:
    report = detect([1.5e308] * 6, [1.6e308] * 6)
    assert report.ratio == pytest.approx(1.6 / 1.5)
    assert report.ci_low == report.ci_high == pytest.approx(1.6 / 1.5)
    dumps(asdict(report))


def test_drift_of_values_hundreds_of_orders_apart_is_a_regression_without_a_ratio() -> None:
    report = detect([1e-9] * 20, [1e300] * 20)
    assert report.verdict == "regressed"
    assert (report.ratio, report.ci_low, report.ci_high, report.shift) == (None,) * 4
    pinned = detect_against(1e-9, [1e300] * 6)
    assert pinned.verdict == "regressed"
    assert pinned.ratio is None
    dumps([asdict(report), asdict(pinned)])


def test_a_bootstrap_bound_past_the_float_range_is_none() -> None:
    low, high = bootstrap_ratio([1e-9] * 5, [1e300] * 5, rounds=100, confidence=0.95, seed=0)
    assert (low, high) == (None, None)


# Properties: every figure serialises under the strict encoder.


@PROPERTY
@given(st.lists(latencies, max_size=12) | st.builds(lambda v, n: [v] * n, latencies,
                                                     st.integers(0, 12)))
def test_stability_of_any_run_values_is_finite_or_undefined_with_a_reason(
        values: list[float]) -> None:
    found = stability(values)
    dumps(found.model_dump(mode="json"))
    assert (found.cov is None) == (found.reason is not None) == (found.band is None)
    if len(values) >= 3 and len(set(values)) == 1 and values[0] > 0:
        assert (found.cov, found.band) == (0.0, "excellent")


@PROPERTY
@given(counts(), objectives)
def test_budget_figures_of_any_counts_are_finite_or_none(window: tuple[int, int],
                                                         objective: float) -> None:
    good, total = window
    figures = [bad_fraction(good, total), compliance(good, total),
               burn_rate(total - good, total, objective),
               budget_remaining(good, total, objective)]
    dumps(figures)
    assert (figures[0] is None) == (total == 0)


@PROPERTY
@given(st.lists(counts(), min_size=8, max_size=8), objectives)
def test_slo_status_of_any_counts_serialises_strictly(windows: list[tuple[int, int]],
                                                      objective: float) -> None:
    needed = needed_windows(86400, DEFAULT_TIERS)
    found = status(objective, 86400, DEFAULT_TIERS, dict(zip(needed, windows, strict=False)))
    dumps(asdict(found))


@PROPERTY
@given(st.lists(st.none() | st.integers(0, 10**6), max_size=12))
def test_capacity_drops_of_any_history_serialise_strictly(values: list[int | None]) -> None:
    fired, baseline = dropped(values)
    dumps([fired, baseline])
    for candidate in capacity_drop_candidates([CapacityHistory("p", "users", tuple(values))]):
        dumps([candidate.labels, candidate.annotations, candidate.condition])


@DRIFT
@given(st.lists(positive, min_size=5, max_size=30), st.lists(positive, min_size=5,
                                                              max_size=30))
def test_drift_reports_of_any_positive_values_serialise_strictly(
        baseline: list[float], recent: list[float]) -> None:
    dumps(asdict(detect(baseline, recent)))
    dumps(asdict(detect_against(baseline[0], recent)))
    dumps(mann_whitney_p(baseline, recent))


@DRIFT
@given(st.builds(lambda v, n: [v] * n, positive, st.integers(5, 12)), positive)
def test_drift_reports_of_equal_values_find_no_change_or_a_step(values: list[float],
                                                                 other: float) -> None:
    same = detect(values, values)
    assert (same.verdict, same.ratio, same.shift) == ("no_change", 1.0, 1.0)
    dumps([asdict(same), asdict(detect(values, [other] * len(values))),
           asdict(detect_against(other, values))])


def sketch_rows(runs: list[list[float]], first_id: int) -> list[SketchRow]:
    return [(first_id + i, START + timedelta(minutes=first_id + i),
             MetricSketch.of(values).to_bytes()) for i, values in enumerate(runs)]


run_values = st.sampled_from([st.just(0.0), st.floats(1e-3, 1e4), st.floats(1e290, HUGE_MS)]
                             ).flatmap(lambda v: st.lists(st.lists(v, max_size=6), max_size=8))
"""Each run's latencies (ms), of one magnitude per draw: zeros, everyday or huge."""


@DRIFT
@given(run_values, run_values, st.sampled_from(["p50", "p99", "mean", "max"]),
       st.booleans())
def test_run_comparisons_of_any_sketches_serialise_strictly(
        base: list[list[float]], recent: list[list[float]], stat: str, pinned: bool) -> None:
    found = compare_runs(sketch_rows(base, 0), sketch_rows(recent, 100), stat, pinned=pinned)
    dumps({"report": asdict(found.report), "baseline": found.baseline.value,
           "recent": found.recent.value,
           "values": [v.value for v in (*found.baseline.values, *found.recent.values)]})


@PROPERTY
@given(run_values, st.lists(st.sampled_from([0.0, 1e-3, 50.0, HUGE_MS]) | latencies,
                            max_size=8))
def test_run_stability_of_any_window_serialises_strictly(runs: list[list[float]],
                                                         throughputs: list[float]) -> None:
    rows = sketch_rows(runs, 0)
    found = run_stability({"ttft": rows, "tpot": rows}, throughputs)
    dumps({name: figure.model_dump(mode="json") for name, figure in found.items()})
