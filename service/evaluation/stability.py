"""Repeatability as a number (pure): the coefficient of variation of run-level figures over a
window (each run's p50 and p99 TTFT and TPOT, its output throughput), with a band: below 5 %
excellent, 5-10 % good, 10-20 % fair, above 20 % unstable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

Band = Literal["excellent", "good", "fair", "unstable"]
MIN_RUNS = 3


class Stability(BaseModel):
    runs: int
    cov: float | None
    """Sample standard deviation over the mean of the runs' values; None with fewer than
    MIN_RUNS runs."""
    band: Band | None


def band(cov: float) -> Band:
    if cov < 0.05:
        return "excellent"
    if cov < 0.10:
        return "good"
    if cov < 0.20:
        return "fair"
    return "unstable"


def stability(values: Sequence[float]) -> Stability:
    """The stability of run-level `values` (each > 0)."""
    n = len(values)
    if n < MIN_RUNS:
        return Stability(runs=n, cov=None, band=None)
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    cov = sd / mean if mean > 0 else math.inf
    return Stability(runs=n, cov=cov, band=band(cov))
