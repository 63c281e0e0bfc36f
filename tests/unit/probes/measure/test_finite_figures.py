"""No figure the measurement library computes is NaN or infinite: each is a finite number, or
None where it is undefined (a rate over no time, the CoV of windows that are all 0), for any
sample set a run can produce. Every result goes through the strict JSON encoder that storage
and the API use, which refuses NaN and the infinities."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sustain.probes.measure.capacity import (
    capacity_result,
    curve_point,
    pareto_front,
    tps_per_user,
)
from sustain.probes.measure.capacity_slo import CapacitySlo
from sustain.probes.measure.confidence import upper_bound_rank
from sustain.probes.measure.deployment import Deployment
from sustain.probes.measure.efficiency import efficiency, efficiency_of
from sustain.probes.measure.finite import coefficient_of_variation, mean, ratio, relative_drift
from sustain.probes.measure.percentiles import QUANTILES, distribution, quantile
from sustain.probes.measure.run_sketches import stage_sketches
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.sessions import e2e_interactivity, session_counts, turns_by_index
from sustain.probes.measure.sketch import MetricSketch, SketchMerger
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.measure.steady import COV_MAX, cov_and_drift, steady_state
from sustain.probes.measure.summary import (
    cache_counts,
    combined_health,
    generator_health,
    quality_counts,
    summarise,
)
from sustain.service.strict_json import dumps
from tests.unit.probes.sample_sets import (
    HUGE_MS,
    PROPERTY,
    durations,
    latencies,
    sample_sets,
    samples,
    stages,
    streamed,
)

SLO = SloThresholds(ttft_ms=200, tpot_ms=50, e2e_ms=2000)
DEPLOYMENT = Deployment(accelerators=8, price_per_hour=98.32, power_kw=10.2)
CAPACITY_SLO = CapacitySlo(ttft_ms=500, tpot_ms=50, percentile=90, min_success=0.9)
EDGE_DURATIONS = (0.0, 5e-324, 1e-310, 1e300)
"""Measured times every sample set is also summarised over: none, denormal, huge."""


def sketch_figures(sketch: MetricSketch) -> dict[str, Any]:
    """What is read from a sketch: its statistics, and its min and max when it has values (an
    empty sketch's are the merge identities, never read)."""
    figures: dict[str, Any] = {
        "count": sketch.count, "mean": sketch.mean,
        **{name: sketch.quantile(q) for name, q in QUANTILES.items()},
        "below": [sketch.count_at_or_below(t) for t in (0.0, 5e-324, 1.0, 1e6, HUGE_MS)]}
    if sketch.count:
        figures.update(min=sketch.min, max=sketch.max)
    return figures


# Steady state: examples of the cases that used to give an infinite CoV, or crash.


def one_read_stage(e2es: list[float]) -> list[Sample]:
    """Requests whose ten tokens all arrived in one read: TTFT == E2E, TPOT 0."""
    return [streamed(e2e, e2e, 10, i) for i, e2e in enumerate(e2es)]


def test_steady_state_of_tokens_all_in_one_read_is_judged_on_e2e_p90() -> None:
    judged = steady_state(one_read_stage([300.0 + i % 3 for i in range(80)]))
    assert judged.state.window_metric == "e2e_p90"
    assert judged.state.steady
    assert judged.state.cov_tpot_p90 is not None
    assert judged.state.cov_tpot_p90 < COV_MAX
    dumps(judged.state.model_dump(mode="json"))


def test_steady_state_of_all_zero_tpot_and_e2e_is_steady_with_undefined_cov() -> None:
    judged = steady_state(one_read_stage([0.0] * 80))
    state = judged.state
    assert (state.steady, state.windows, state.steady_windows) == (True, 10, 10)
    assert (state.cov_tpot_p90, state.drift) == (None, None)
    assert state.window_metric == "e2e_p90"
    assert "undefined" in state.reason
    assert "constancy" in state.reason
    assert judged.start_ms is None
    dumps(state.model_dump(mode="json"))


def test_steady_state_of_streamed_tokens_names_tpot_p90_as_its_window_metric() -> None:
    stage = [streamed(10.0, 10.0 + 9 * 5.0, 10, i) for i in range(80)]
    judged = steady_state(stage)
    assert (judged.state.window_metric, judged.state.steady) == ("tpot_p90", True)
    assert (judged.state.cov_tpot_p90, judged.state.drift) == (0.0, 0.0)


def test_steady_state_of_latencies_near_1e300_ms_is_finite() -> None:
    stage = [streamed(1e299, 1e299 + 9 * (1e300 + i % 5 * 1e298), 10, i) for i in range(80)]
    judged = steady_state(stage)
    assert judged.state.cov_tpot_p90 is not None
    assert judged.state.cov_tpot_p90 < COV_MAX
    dumps(judged.state.model_dump(mode="json"))


def test_cov_and_drift_of_zeros_are_undefined_and_of_equal_values_zero() -> None:
    assert cov_and_drift([0.0] * 4) == (None, None)
    assert cov_and_drift([7.5] * 4) == (0.0, 0.0)
    assert cov_and_drift([1e300] * 4) == (0.0, 0.0)


@pytest.mark.parametrize("values", [[], [5.0], [0.0]])
def test_cov_and_drift_of_fewer_than_two_values_are_undefined(values: list[float]) -> None:
    assert cov_and_drift(values) == (None, None)


def test_cov_and_drift_do_not_change_with_the_scale_of_the_values() -> None:
    values = [4.0, 5.0, 6.0, 5.5]
    cov, drift = cov_and_drift(values)
    for scale in (1e-300, 1e-200, 1e200, 1e300 / 6):
        scaled_cov, scaled_drift = cov_and_drift([v * scale for v in values])
        assert scaled_cov == pytest.approx(cov, rel=1e-12)
        assert scaled_drift == pytest.approx(drift, rel=1e-12)


# Other figures: examples that used to be infinite or crash.


def test_tps_per_user_of_a_denormal_tpot_is_none() -> None:
    summary = summarise([streamed(0.0, 5e-324, 2)] * 3, 1.0)
    assert summary.tpot_ms.p90 == 5e-324
    assert tps_per_user(summary) is None
    dumps(curve_point(1, summary).model_dump(mode="json"))


def test_rates_over_a_denormal_duration_are_none() -> None:
    summary = summarise([streamed(1.0, 2.0, 10)], 1e-310, SLO)
    assert (summary.requests_per_second, summary.output_tokens_per_second) == (None, None)
    assert summary.goodput is None
    assert efficiency(summary, DEPLOYMENT).cost_per_million_good_tokens is None


def test_costs_per_million_tokens_at_a_denormal_rate_are_none() -> None:
    found = efficiency_of(1e-310, 5e-324, DEPLOYMENT)
    assert found.cost_per_million_output_tokens is None
    assert found.cost_per_million_good_tokens is None
    assert found.output_tps_per_accelerator == pytest.approx(1e-310 / 8)


def test_interactivity_of_turns_taking_a_denormal_time_is_none() -> None:
    turn = replace(streamed(0.0, 1e-310, 1000), conversation="c0", turn=0, session_end=True)
    assert e2e_interactivity([turn]) is None


def test_distribution_of_values_near_the_float_maximum_has_a_finite_mean() -> None:
    found = distribution([1.7e308, 1.7e308, 1.6e308])
    assert found.mean == pytest.approx(1.7e308 / 3 * 2 + 1.6e308 / 3)
    dumps(found.model_dump(mode="json"))


def test_quantile_between_huge_values_of_opposite_signs_is_finite() -> None:
    assert quantile([-1.5e308, 1.5e308], 0.5) == 0.0
    assert quantile([-1.5e308, 1.5e308], 0.75) == pytest.approx(0.75e308)


def test_a_sketch_counts_its_zeros_at_or_below_zero() -> None:
    sketch = MetricSketch.of([0.0, 0.0, 5.0])
    assert sketch.count_at_or_below(0.0) == 2
    assert sketch.count_at_or_below(5e-324) == 2


def test_a_sketch_of_values_near_the_float_maximum_has_no_mean_but_its_quantiles() -> None:
    sketch = MetricSketch.of([1.7e308, 1.7e308])
    assert sketch.mean is None
    assert sketch.quantile(0.5) == pytest.approx(1.7e308, rel=0.01)
    added = MetricSketch()
    added.add(1.7e308)
    added.add(1.7e308)
    assert added.mean is None


# Properties: every figure of every sample set serialises under the strict encoder.


@PROPERTY
@given(sample_sets(), durations, st.booleans())
def test_summaries_of_any_sample_set_serialise_strictly(samples_: list[Sample],
                                                        duration_s: float,
                                                        with_slo: bool) -> None:
    for seconds in (duration_s, *EDGE_DURATIONS):
        summary = summarise(samples_, seconds, SLO if with_slo else None)
        dumps(summary.model_dump(mode="json"))
        dumps(efficiency(summary, DEPLOYMENT).model_dump(mode="json"))


@PROPERTY
@given(stages())
def test_steady_state_of_any_stage_is_finite_and_names_its_window_metric(
        stage: list[Sample]) -> None:
    judged = steady_state(stage)
    dumps(judged.state.model_dump(mode="json"))
    assert judged.state.window_metric in ("tpot_p90", "e2e_p90")
    if judged.state.cov_tpot_p90 is None:
        assert "undefined" in judged.state.reason


@PROPERTY
@given(sample_sets())
def test_steady_state_of_any_sample_set_serialises_strictly(samples_: list[Sample]) -> None:
    dumps(steady_state(samples_).state.model_dump(mode="json"))


@PROPERTY
@given(st.lists(latencies, max_size=12))
def test_cov_and_drift_of_any_latencies_are_finite_non_negative_or_undefined(
        values: list[float]) -> None:
    for figure in cov_and_drift(values):
        assert figure is None or (math.isfinite(figure) and figure >= 0)
    if len(values) >= 2 and len(set(values)) == 1 and values[0] > 0:
        assert cov_and_drift(values) == (0.0, 0.0)


@PROPERTY
@given(st.lists(latencies | st.floats(min_value=-HUGE_MS, max_value=0.0), max_size=40))
def test_distribution_of_any_values_serialises_strictly(values: list[float]) -> None:
    dumps(distribution(values).model_dump(mode="json"))
    dumps([mean(values), coefficient_of_variation(values), relative_drift(values)])


@PROPERTY
@given(st.lists(latencies, min_size=1, max_size=20).map(sorted), st.floats(0.0, 1.0))
def test_quantiles_lie_between_the_least_and_greatest_value(values: list[float],
                                                           q: float) -> None:
    assert values[0] <= quantile(values, q) <= values[-1]


@PROPERTY
@given(st.integers(0, 3000), st.floats(0.0, 1.0))
def test_upper_bound_ranks_are_ranks_of_the_values_or_none(n: int, q: float) -> None:
    rank = upper_bound_rank(n, q)
    assert rank is None or 1 <= rank <= n - 1


REGIMES = (st.just(0.0), st.floats(1e-3, 1e4), st.floats(1e290, HUGE_MS),
           st.floats(5e-324, 1e-300))
"""Sketch values of one order of magnitude range each (a sketch spanning 5e-324 to 1e300 ms
holds tens of thousands of bins: correct, but slow to draw many of)."""
sketch_values = st.sampled_from(REGIMES).flatmap(lambda values: st.lists(values, max_size=30))


def test_a_sketch_spanning_denormals_to_1e300_ms_gives_finite_figures() -> None:
    sketch = MetricSketch.of([0.0, 5e-324, 1e-300, 1.0, 1e300])
    again = MetricSketch.from_bytes(sketch.to_bytes())
    again.merge(sketch)
    dumps(sketch_figures(again))


@PROPERTY
@given(sketch_values, sketch_values)
def test_sketches_built_merged_and_decoded_give_finite_figures(first: list[float],
                                                               second: list[float]) -> None:
    one, other = MetricSketch.of(first), MetricSketch()
    for value in second:
        other.add(value)
    decoded = MetricSketch.from_bytes(one.to_bytes())
    decoded.merge(MetricSketch.from_bytes(other.to_bytes()))
    merger = SketchMerger()
    merger.add(one.to_bytes())
    merger.add(MetricSketch.of(second).to_bytes())
    for sketch in (one, other, decoded, merger.result()):
        dumps(sketch_figures(sketch))
    assert decoded.count == merger.result().count == len(first) + len(second)


@settings(PROPERTY, max_examples=8)
@given(sample_sets())
def test_stage_sketches_of_any_sample_set_give_finite_figures(samples_: list[Sample]) -> None:
    for sketch in stage_sketches(samples_).values():
        dumps(sketch_figures(MetricSketch.from_bytes(sketch.to_bytes())))


@PROPERTY
@given(st.lists(st.tuples(st.integers(1, 64), sample_sets(), durations), max_size=4))
def test_capacity_results_and_pareto_fronts_of_any_levels_serialise_strictly(
        levels: list[tuple[int, list[Sample], float]]) -> None:
    measured = [(level, summarise(stage, seconds, SLO)) for level, stage, seconds in levels]
    result = capacity_result("users", CAPACITY_SLO, measured)
    dumps(result.model_dump(mode="json"))
    dumps([point.model_dump(mode="json") for point in pareto_front(result.points)])
    for level, summary in measured:
        point = curve_point(level, summary)
        assert point.tps_per_user is None or point.tps_per_user > 0


@PROPERTY
@given(st.none() | durations, st.none() | durations,
       st.builds(Deployment, accelerators=st.none() | st.integers(1, 1_000_000),
                 price_per_hour=st.none() | st.floats(0.0, 1e9),
                 power_kw=st.none() | st.floats(1e-300, 1e6)))
def test_efficiency_of_any_rates_serialises_strictly(tps: float | None, good_tps: float | None,
                                                     deployment: Deployment) -> None:
    dumps(efficiency_of(tps, good_tps, deployment).model_dump(mode="json"))


@PROPERTY
@given(st.lists(st.integers(0, 40).flatmap(lambda i: samples(i, sessions=True)), max_size=30))
def test_session_figures_of_any_turns_serialise_strictly(turns: list[Sample]) -> None:
    counts = session_counts(turns)
    rows = turns_by_index(turns)
    dumps({"counts": None if counts is None else counts.model_dump(mode="json"),
           "turns": None if rows is None else [r.model_dump(mode="json") for r in rows],
           "interactivity": e2e_interactivity(turns)})


@PROPERTY
@given(st.lists(sample_sets(), max_size=3))
def test_generator_health_and_counts_of_any_sample_sets_serialise_strictly(
        sets: list[list[Sample]]) -> None:
    health = [generator_health(s) for s in sets]
    dumps([h.model_dump(mode="json") for h in health])
    dumps(combined_health(health).model_dump(mode="json"))
    for samples_ in sets:
        quality = quality_counts(samples_)
        dumps([None if quality is None else quality.ratio, cache_counts(samples_)])


@PROPERTY
@given(durations | st.floats(-HUGE_MS, HUGE_MS), durations)
def test_ratios_are_finite_or_none(numerator: float, denominator: float) -> None:
    found = ratio(numerator, denominator)
    assert found is None or math.isfinite(found)
    if denominator > 0:
        assert (found is None) == (not math.isfinite(numerator / denominator))
    else:
        assert found is None
