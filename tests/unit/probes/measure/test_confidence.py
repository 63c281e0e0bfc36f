"""Distribution-free upper bounds of percentiles, as MLPerf's early stopping counts them."""

from __future__ import annotations

import random

import pytest

from sustain.probes.measure.confidence import min_samples, upper_bound_rank
from sustain.probes.measure.percentiles import distribution


def test_minimum_samples_match_mlperf_early_stopping() -> None:
    assert min_samples(0.90) == 64
    assert min_samples(0.99) == 662
    assert min_samples(0.999) == 6636


def test_the_bound_is_never_the_sample_maximum() -> None:
    assert upper_bound_rank(661, 0.99) is None
    assert upper_bound_rank(662, 0.99) == 661


def test_the_bound_covers_the_true_percentile_at_least_99_percent_of_the_time() -> None:
    rng = random.Random(5)
    true_p90 = 1.2815515655446004  # standard normal 90th percentile
    misses = 0
    trials = 2000
    for _ in range(trials):
        values = sorted(rng.gauss(0, 1) for _ in range(200))
        rank = upper_bound_rank(200, 0.90)
        assert rank is not None
        misses += values[rank - 1] < true_p90
    assert misses / trials <= 0.01 + 0.006


def test_distribution_flags_percentiles_without_a_bound() -> None:
    dist = distribution([float(v) for v in range(700)])
    assert "p99" not in dist.low_count
    assert "p999" in dist.low_count
    assert dist.upper_bounds["p99"] >= dist.p99  # type: ignore[operator]
    assert "p999" not in dist.upper_bounds
    small = distribution([float(v) for v in range(40)])
    assert small.low_count == ["p90", "p95", "p99", "p999"]
    assert small.p99 == pytest.approx(38.61)
