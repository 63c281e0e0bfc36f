"""Exact percentiles over one run's values, each with its sample count and a distribution-free
upper confidence bound (see confidence.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

from sustain.probes.measure.confidence import CONFIDENCE, upper_bound_rank
from sustain.probes.measure.finite import mean as finite_mean

QUANTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}
"""The reported percentiles and their quantile levels."""


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (NumPy's default), on pre-sorted finite
    values, in their unit; always between its two ranks' values, so finite (the gap between
    values of opposite signs near the float maximum would overflow: it is then not formed)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile level {q} outside [0, 1]")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    low, high = sorted_values[lo], sorted_values[hi]
    value = low + (high - low) * frac
    return value if math.isfinite(value) else low * (1.0 - frac) + high * frac


class Distribution(BaseModel):
    """Summary of one metric over one run or stage; values in the metric's unit (ms)."""

    count: int
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    upper_bounds: dict[str, float] = Field(default_factory=dict)
    """Per percentile, a value the true percentile is at or below with 99 % confidence."""
    low_count: list[str] = Field(default_factory=list)
    """Percentiles with too few samples for a 99 % confidence bound: reported, not trusted."""


def distribution(values: Sequence[float]) -> Distribution:
    """Exact summary of finite `values` (ms); an empty input gives count 0 and no statistics.
    Every figure is finite: the mean too, when the values' sum is beyond the float range."""
    if not values:
        return Distribution(count=0, low_count=list(QUANTILES))
    ordered = sorted(values)
    n = len(ordered)
    bounds: dict[str, float] = {}
    for name, q in QUANTILES.items():
        rank = upper_bound_rank(n, q, CONFIDENCE)
        if rank is not None:
            bounds[name] = ordered[rank - 1]
    return Distribution(
        count=n,
        mean=finite_mean(ordered),
        min=ordered[0],
        max=ordered[-1],
        upper_bounds=bounds,
        low_count=[name for name in QUANTILES if name not in bounds],
        **{name: quantile(ordered, q) for name, q in QUANTILES.items()},
    )
