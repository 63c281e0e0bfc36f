"""Exact percentiles over one run's values, each reported with its sample count."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

QUANTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}
"""The reported percentiles and their quantile levels."""

MIN_TAIL_SAMPLES = 5
"""A percentile is flagged low_count unless at least this many samples lie at or beyond it.

p99 therefore needs 500 samples and p50 needs 10; below that the value is still reported but
flagged, so a p99 from 40 samples is never mistaken for a trustworthy tail.
"""


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (NumPy's default), on pre-sorted values."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile level {q} outside [0, 1]")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def is_low_count(count: int, q: float) -> bool:
    """True when fewer than MIN_TAIL_SAMPLES of `count` samples lie at or beyond level q."""
    return count * (1.0 - q) < MIN_TAIL_SAMPLES


class Distribution(BaseModel):
    """Summary of one metric over one run; values in the metric's unit (ms for latencies)."""

    count: int
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    low_count: list[str] = []
    """Names of the percentiles above that rest on too few samples (see MIN_TAIL_SAMPLES)."""


def distribution(values: Sequence[float]) -> Distribution:
    """Exact summary of `values`; an empty input gives count 0 and no statistics."""
    if not values:
        return Distribution(count=0, low_count=list(QUANTILES))
    ordered = sorted(values)
    n = len(ordered)
    stats = {name: quantile(ordered, q) for name, q in QUANTILES.items()}
    return Distribution(
        count=n,
        mean=math.fsum(ordered) / n,
        min=ordered[0],
        max=ordered[-1],
        low_count=[name for name, q in QUANTILES.items() if is_low_count(n, q)],
        **stats,
    )
