"""No window statistic is NaN or infinite: percentiles, means and maxima of merged sketches,
availability and throughputs of summed counts are finite numbers, or None where undefined
(no values, no measured time), for windows of no runs, one, equal runs, zeros and latencies
up to 1e300 ms. Every statistic goes through the strict JSON encoder that the API uses."""

from __future__ import annotations

from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from sustain.probes.measure.sketch import MetricSketch
from sustain.service.history.aggregate import (
    STATS,
    Aggregate,
    Counts,
    Piece,
    SketchPiece,
    assemble,
    count_stat,
    latency_stat,
    plan,
)
from sustain.service.history.windows import DAY_S, HOUR_S
from sustain.service.strict_json import dumps
from tests.unit.probes.sample_sets import HUGE_MS, PROPERTY, durations

LATENCY = ("p50", "p90", "p95", "p99", "p999", "mean", "max")


def statistics(agg: Aggregate, metric: str = "ttft") -> dict[str, object]:
    sketch = agg.sketch(metric)
    return {stat: asdict(latency_stat(sketch, stat) if stat in LATENCY else
                         count_stat(agg, stat)) for stat in STATS}


def test_throughputs_over_a_denormal_measured_time_are_none() -> None:
    agg = Aggregate()
    agg.add_counts(Counts(runs=1, attempts=5, successes=5, good=5, good_measured_s=1e-310,
                          output_tokens=500, measured_s=1e-310))
    for stat in ("request_throughput", "output_token_throughput", "goodput"):
        assert count_stat(agg, stat).value is None
    dumps(statistics(agg))


def test_the_mean_of_a_window_whose_sum_overflowed_is_none() -> None:
    sketch = MetricSketch()
    sketch.add(1.7e308)
    sketch.add(1.7e308)
    assert latency_stat(sketch, "mean").value is None
    assert latency_stat(sketch, "max").value == 1.7e308


counts = st.builds(
    Counts, runs=st.integers(0, 1000), attempts=st.integers(0, 10**9),
    successes=st.integers(0, 10**9), good=st.integers(0, 10**9), good_measured_s=durations,
    output_tokens=st.integers(0, 10**12), measured_s=durations)
run_latencies = st.sampled_from(
    [st.just(0.0), st.floats(1e-3, 1e4), st.floats(1e290, HUGE_MS)]
).flatmap(lambda v: st.lists(st.lists(v, max_size=6), max_size=6))
"""Each run's latencies (ms), of one magnitude per draw: zeros, everyday or huge."""


@PROPERTY
@given(st.lists(counts, max_size=4), run_latencies)
def test_window_statistics_of_any_runs_serialise_strictly(pieces: list[Counts],
                                                          runs: list[list[float]]) -> None:
    agg = Aggregate()
    for piece in pieces:
        agg.add_counts(piece)
    for values in runs:
        agg.add_sketch("ttft", MetricSketch.of(values).to_bytes())
    dumps(statistics(agg))
    dumps(statistics(agg, "a metric without sketches"))


@PROPERTY
@given(counts, run_latencies, st.integers(1, 3))
def test_assembled_windows_of_runs_hours_and_days_serialise_strictly(
        each: Counts, runs: list[list[float]], days: int) -> None:
    windows = plan([(0.0, days * DAY_S + 1800.0)])
    starts = [float(s) for s in range(0, days * DAY_S, HOUR_S)]
    sketches = [MetricSketch.of(values).to_bytes() for values in runs]
    pieces = [Piece(start, each) for start in starts]
    sketch_pieces = [SketchPiece(start, "e2e", data) for start in starts[:3]
                     for data in sketches]
    for agg in assemble(windows, pieces, pieces, pieces, sketch_pieces, sketch_pieces,
                        sketch_pieces):
        dumps(statistics(agg, "e2e"))
