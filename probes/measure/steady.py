"""Steady state of a stage (pure), as MLPerf Endpoints judges it: the stage's completed
requests, in completion order, are cut into windows of equal count; each window's TPOT p90
(E2E p90 where no request streamed tokens) is one value; the stage is steady from the first
window on which the values that follow have a coefficient of variation below COV_MAX and a
relative drift (a least-squares line's change over those windows, over their mean) below
DRIFT_MAX, with at least MIN_WINDOWS windows. A stage's figures are then taken over its
steady part (for curve points); a stage that never settles is flagged, not averaged."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sample import Outcome, Sample

COV_MAX = 0.05
DRIFT_MAX = 0.15
MIN_WINDOWS = 4
MAX_WINDOWS = 10
MIN_PER_WINDOW = 8
"""Requests per window at the least: fewer cannot give a p90 worth comparing."""


class SteadyState(BaseModel):
    steady: bool
    windows: int
    """Windows the stage was cut into."""
    steady_windows: int
    """Of those, the steady run at the end (0 when not steady)."""
    cov_tpot_p90: float | None
    """Coefficient of variation of the window values over the steady part (over all the
    windows when not steady)."""
    drift: float | None
    """Relative drift of the window values over the same part."""
    reason: str


@dataclass(frozen=True, slots=True)
class Judged:
    state: SteadyState
    samples: list[Sample]
    """The samples the stage's figures should use: the steady part, or all when not steady."""
    start_ms: float | None
    """Where the steady part begins (its first request's send), when it is shorter."""


def _p90(samples: Sequence[Sample]) -> float:
    values = sorted(v for s in samples if (v := s.tpot_ms) is not None)
    if len(values) < len(samples) // 2:
        values = sorted(s.e2e_ms for s in samples)
    return quantile(values, 0.9)


def cov_and_drift(values: Sequence[float]) -> tuple[float, float]:
    """Coefficient of variation (sample standard deviation over the mean) and relative drift
    (the least-squares line's rise over the values' span, over their mean)."""
    n = len(values)
    mean = math.fsum(values) / n
    if mean <= 0:
        return math.inf, math.inf
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    xs = range(n)
    x_mean = (n - 1) / 2
    slope = math.fsum((x - x_mean) * (v - mean) for x, v in zip(xs, values, strict=True)) / \
        math.fsum((x - x_mean) ** 2 for x in xs)
    return sd / mean, abs(slope * (n - 1)) / mean


def steady_state(samples: Sequence[Sample]) -> Judged:
    """The stage's steady state from its samples (any order)."""
    done = sorted((s for s in samples if s.outcome is Outcome.SUCCESS),
                  key=lambda s: s.t_send_ms + s.e2e_ms)
    count = min(MAX_WINDOWS, len(done) // MIN_PER_WINDOW)
    if count < MIN_WINDOWS:
        return Judged(SteadyState(
            steady=False, windows=count, steady_windows=0, cov_tpot_p90=None, drift=None,
            reason=f"{len(done)} completed requests: fewer than {MIN_WINDOWS} windows of "
                   f"{MIN_PER_WINDOW}"), list(samples), None)
    size = len(done) // count
    windows = [done[i * size:(i + 1) * size if i < count - 1 else len(done)]
               for i in range(count)]
    values = [_p90(window) for window in windows]
    for first in range(count - MIN_WINDOWS + 1):
        cov, drift = cov_and_drift(values[first:])
        if cov < COV_MAX and drift < DRIFT_MAX:
            kept = [s for window in windows[first:] for s in window]
            start = min(s.t_send_ms for s in kept)
            state = SteadyState(
                steady=True, windows=count, steady_windows=count - first, cov_tpot_p90=cov,
                drift=drift, reason="steady" if first == 0 else
                f"steady from window {first + 1} of {count}")
            if first == 0:
                return Judged(state, list(samples), None)
            failed = [s for s in samples if s.outcome is not Outcome.SUCCESS
                      and s.t_send_ms >= start]
            return Judged(state, sorted([*kept, *failed], key=lambda s: s.seq), start)
    cov, drift = cov_and_drift(values)
    return Judged(SteadyState(
        steady=False, windows=count, steady_windows=0, cov_tpot_p90=cov, drift=drift,
        reason=f"never settled: CoV {cov:.3f} (< {COV_MAX}) and drift {drift:.3f} "
               f"(< {DRIFT_MAX}) not met over any last {MIN_WINDOWS}+ windows"),
        list(samples), None)
