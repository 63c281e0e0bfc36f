"""Repeatability as a number (pure): the coefficient of variation of run-level figures over a
window (each run's p50 and p99 TTFT and TPOT, its output throughput), with a band: below 5 %
excellent, 5-10 % good, 10-20 % fair, above 20 % unstable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from sustain.probes.measure.finite import coefficient_of_variation

Band = Literal["excellent", "good", "fair", "unstable"]
MIN_RUNS = 3


class Stability(BaseModel):
    runs: int
    cov: float | None
    """Sample standard deviation over the mean of the runs' values (unitless); 0 when they
    are all equal; None with fewer than MIN_RUNS runs, or when every value is 0 (a CoV over a
    mean of 0 is undefined), or a value that is not a finite number: `reason` says which."""
    band: Band | None
    reason: str | None = None
    """Why `cov` is None; None when it is a number."""


def band(cov: float) -> Band:
    if cov < 0.05:
        return "excellent"
    if cov < 0.10:
        return "good"
    if cov < 0.20:
        return "fair"
    return "unstable"


def stability(values: Sequence[float]) -> Stability:
    """The stability of run-level `values` (each >= 0, finite, in any one unit)."""
    n = len(values)
    if n < MIN_RUNS:
        return Stability(runs=n, cov=None, band=None,
                         reason=f"{n} runs: fewer than {MIN_RUNS}")
    if not all(math.isfinite(v) for v in values):
        return Stability(runs=n, cov=None, band=None,
                         reason="a run's value is not a finite number")
    cov = coefficient_of_variation(values)
    if cov is None:
        return Stability(runs=n, cov=None, band=None,
                         reason="every run's value is 0: a CoV over a mean of 0 is undefined")
    return Stability(runs=n, cov=cov, band=band(cov))
