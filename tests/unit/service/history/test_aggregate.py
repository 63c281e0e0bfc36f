"""Window statistics: merged sketches for percentiles, summed counts for rates, and each stored
piece counted once."""

from __future__ import annotations

import random

import pytest

from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sketch import MetricSketch
from sustain.service.history.aggregate import (
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


def counts(attempts: int, successes: int, measured_s: float = 10.0) -> Counts:
    return Counts(runs=1, attempts=attempts, successes=successes, good=successes,
                  good_measured_s=measured_s, output_tokens=successes * 10,
                  measured_s=measured_s)


def test_percentiles_of_merged_sketches_are_within_one_percent_of_exact() -> None:
    rng = random.Random(5)
    runs = [[rng.lognormvariate(4, 0.5) for _ in range(200)] for _ in range(50)]
    agg = Aggregate()
    for values in runs:
        agg.add_sketch("ttft", MetricSketch.of(values).to_bytes())
    exact = sorted(v for values in runs for v in values)
    for stat, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
        result = latency_stat(agg.sketch("ttft"), stat)
        assert result.value == pytest.approx(quantile(exact, q), rel=0.01)
        assert result.count == 10_000
    assert latency_stat(agg.sketch("ttft"), "max").value == max(exact)


def test_a_p99_of_few_values_is_flagged_low_count() -> None:
    agg = Aggregate()
    agg.add_sketch("ttft", MetricSketch.of(range(1, 41)).to_bytes())
    assert latency_stat(agg.sketch("ttft"), "p99").low_count
    assert not latency_stat(agg.sketch("ttft"), "p50").low_count


def test_availability_and_throughput_are_sums_not_averages() -> None:
    agg = Aggregate()
    agg.add_counts(counts(100, 100, measured_s=10))
    agg.add_counts(counts(900, 450, measured_s=90))
    assert count_stat(agg, "availability").value == pytest.approx(550 / 1000)
    assert count_stat(agg, "request_throughput").value == pytest.approx(550 / 100)
    assert count_stat(agg, "output_token_throughput").value == pytest.approx(5500 / 100)


def test_an_empty_window_has_no_value_and_is_low_count() -> None:
    result = count_stat(Aggregate(), "availability")
    assert result.value is None
    assert result.low_count


def test_each_piece_counts_once_in_its_own_window() -> None:
    day = 20_000 * DAY_S
    windows = [(day - HOUR_S, day + DAY_S + 1800)]
    p = plan(windows)
    aggs = assemble(
        p,
        days=[Piece(day, counts(10, 10))],
        hours=[Piece(day - HOUR_S, counts(1, 1)),
               Piece(day + 5 * HOUR_S, counts(1000, 0))],  # inside the day: ignored
        runs=[Piece(day + DAY_S + 60, counts(2, 2)),
              Piece(day + 60, counts(1000, 0))],  # inside the day: ignored
        day_sketches=[SketchPiece(day, "ttft", MetricSketch.of([1.0]).to_bytes())],
        hour_sketches=[], run_sketches=[])
    (agg,) = aggs
    assert (agg.runs, agg.attempts, agg.successes) == (3, 13, 13)
    assert agg.sketch("ttft").count == 1
