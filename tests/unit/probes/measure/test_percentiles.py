from __future__ import annotations

import pytest

from sustain.probes.measure.percentiles import distribution, quantile


def test_quantile_interpolates_between_closest_ranks() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.0) == 1.0
    assert quantile(values, 1.0) == 4.0
    assert quantile(values, 0.5) == pytest.approx(2.5)
    assert quantile(values, 0.9) == pytest.approx(3.7)


def test_quantile_rejects_empty_input_and_bad_levels() -> None:
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match="outside"):
        quantile([1.0], 1.5)


def test_distribution_is_exact_over_one_to_one_thousand() -> None:
    dist = distribution([float(v) for v in range(1000, 0, -1)])
    assert dist.count == 1000
    assert dist.min == 1.0
    assert dist.max == 1000.0
    assert dist.mean == pytest.approx(500.5)
    assert dist.p50 == pytest.approx(500.5)
    assert dist.p99 == pytest.approx(990.01)


def test_p99_from_forty_samples_is_flagged_low_count() -> None:
    dist = distribution([float(v) for v in range(40)])
    assert "p99" in dist.low_count
    assert "p50" not in dist.low_count
    assert dist.p99 is not None


def test_empty_distribution_has_count_zero_and_no_values() -> None:
    dist = distribution([])
    assert dist.count == 0
    assert dist.p50 is None
    assert dist.mean is None
