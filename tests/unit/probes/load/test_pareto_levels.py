"""Pareto points by MLPerf Endpoints' region rule (probes/load/pareto_levels.py)."""

from __future__ import annotations

import pytest

from sustain.probes.load.pareto_levels import pareto_levels, regions


@pytest.mark.parametrize("max_concurrency", [256, 512, 1024, 4096, 10_000])
@pytest.mark.parametrize("points", [7, 10, 32])
def test_one_point_in_ultra_low_and_one_in_each_upper_region(max_concurrency: int,
                                                            points: int) -> None:
    levels = pareto_levels(max_concurrency, points)
    assert len(levels) == points
    assert levels == sorted(set(levels))
    assert levels[-1] == max_concurrency
    for _, first, last in regions(max_concurrency):
        assert any(first <= level <= last for level in levels)


def test_a_small_maximum_spreads_its_points_in_log2_from_1() -> None:
    assert pareto_levels(64, 7) == [1, 2, 4, 8, 16, 32, 64]
    assert pareto_levels(5, 7) == [1, 2, 3, 4, 5]
