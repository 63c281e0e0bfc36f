"""The concurrencies of a Pareto curve, by MLPerf Endpoints' region rule as its submission
docs describe it: at least one point in Ultra Low (1-32, fixed), and one in each of Low,
Medium and High, which split the log2 range from 32 to C_max in equal thirds; the remaining
points are spread over those three regions, evenly in log2. Below C_max 256 the upper
regions are narrower than a doubling each, and the points are spread evenly in log2 from 1
to C_max instead. Pure."""

from __future__ import annotations

import math

ULTRA_LOW_MAX = 32


def pareto_levels(max_concurrency: int, points: int) -> list[int]:
    """`points` distinct concurrencies from 1 to `max_concurrency`, ascending (fewer when
    there are not that many integers)."""
    if max_concurrency <= points:
        return list(range(1, max_concurrency + 1))
    if max_concurrency < 8 * ULTRA_LOW_MAX:
        return _spread(1, max_concurrency, points)
    upper = _spread(ULTRA_LOW_MAX + 1, max_concurrency, points - 1)
    levels = sorted({1, *upper})
    candidate = 2
    while len(levels) < points and candidate <= max_concurrency:  # rounding collided
        if candidate not in levels:
            levels = sorted({*levels, candidate})
        candidate *= 2
    return levels[:points] if len(levels) > points else levels


def _spread(low: int, high: int, count: int) -> list[int]:
    """`count` integers from `low` to `high`, both included, evenly spaced in log2 (distinct:
    a collision moves up to the next free integer)."""
    if count <= 1:
        return [high]
    step = (math.log2(high) - math.log2(low)) / (count - 1)
    out: list[int] = []
    for index in range(count):
        level = round(2 ** (math.log2(low) + index * step))
        level = max(level, (out[-1] + 1) if out else low)
        out.append(min(level, high))
    return sorted(set(out))


def regions(max_concurrency: int) -> list[tuple[str, int, int]]:
    """(name, first, last) of the four regions for `max_concurrency` >= 256."""
    span = math.log2(max_concurrency) - math.log2(ULTRA_LOW_MAX)
    edges = [round(ULTRA_LOW_MAX * 2 ** (span * k / 3)) for k in (1, 2)]
    return [("ultra_low", 1, ULTRA_LOW_MAX), ("low", ULTRA_LOW_MAX + 1, edges[0]),
            ("medium", edges[0] + 1, edges[1]), ("high", edges[1] + 1, max_concurrency)]
