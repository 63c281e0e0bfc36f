"""Steady state of a stage (pure), as MLPerf Endpoints judges it: the stage's completed
requests, in completion order, are cut into windows of equal count; each window's TPOT p90
is one value; the stage is steady from the first window on which the values that follow have
a coefficient of variation below COV_MAX and a relative drift (a least-squares line's change
over those windows, over their mean) below DRIFT_MAX, with at least MIN_WINDOWS windows. A
stage's figures are then taken over its steady part (for curve points); a stage that never
settles is flagged, not averaged.

The windows are judged on E2E p90 instead where TPOT says nothing: where no request streamed
tokens, or where every window's TPOT p90 is 0 (a server that writes a response's events in
one go makes every token arrive in one read). Windows whose values are all equal are steady
by constancy; when those values are all 0 the CoV and drift (ratios over the mean) are
undefined and reported as None, with the reason saying so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from sustain.probes.measure.finite import coefficient_of_variation, relative_drift
from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sample import Outcome, Sample

COV_MAX = 0.05
DRIFT_MAX = 0.15
MIN_WINDOWS = 4
MAX_WINDOWS = 10
MIN_PER_WINDOW = 8
"""Requests per window at the least: fewer cannot give a p90 worth comparing."""

WindowMetric = Literal["tpot_p90", "e2e_p90"]
_LABELS: dict[WindowMetric, str] = {"tpot_p90": "TPOT p90", "e2e_p90": "E2E p90"}


class SteadyState(BaseModel):
    steady: bool
    windows: int
    """Windows the stage was cut into."""
    steady_windows: int
    """Of those, the steady run at the end (0 when not steady)."""
    cov_tpot_p90: float | None
    """Coefficient of variation of the window values (`window_metric`) over the steady part
    (over all the windows when not steady); None with too few windows, or when the values
    are all 0 (the CoV is undefined: `reason` says so)."""
    drift: float | None
    """Relative drift of the window values over the same part; None as the CoV is."""
    reason: str
    window_metric: WindowMetric | None = None
    """The statistic of each window that was judged: `tpot_p90`, or `e2e_p90` where no
    request streamed tokens or every window's TPOT p90 was 0; None with too few windows."""


@dataclass(frozen=True, slots=True)
class Judged:
    state: SteadyState
    samples: list[Sample]
    """The samples the stage's figures should use: the steady part, or all when not steady."""
    start_ms: float | None
    """Where the steady part begins (its first request's send), when it is shorter."""


def window_values(windows: Sequence[Sequence[Sample]]) -> tuple[WindowMetric, list[float]]:
    """Each window's TPOT p90 (ms) when every window has a TPOT for at least half its requests
    and some window's TPOT p90 is not 0; else each window's E2E p90 (ms). One statistic for
    the whole stage, so the values compare; a TPOT p90 of 0 everywhere (every token in one
    read) tells nothing about the stage, while its E2E does."""
    tpots = []
    for window in windows:
        values = sorted(v for s in window if (v := s.tpot_ms) is not None)
        if not values or len(values) < len(window) // 2:
            break
        tpots.append(quantile(values, 0.9))
    else:
        if any(v != 0 for v in tpots):
            return "tpot_p90", tpots
    return "e2e_p90", [quantile(sorted(s.e2e_ms for s in window), 0.9) for window in windows]


def cov_and_drift(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Coefficient of variation (sample standard deviation over the mean) and relative drift
    (the least-squares line's rise over the values' span, over their mean), both unitless:
    (0.0, 0.0) for equal values > 0; (None, None) with fewer than two values or a mean that
    is not > 0 (values all 0), where both are undefined. Never NaN or infinite, whatever the
    magnitude of the values."""
    return coefficient_of_variation(values), relative_drift(values)


def _constant(values: Sequence[float]) -> bool:
    return all(v == values[0] for v in values)


def _figure(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


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
    metric, values = window_values(windows)
    label = _LABELS[metric]
    for first in range(count - MIN_WINDOWS + 1):
        tail = values[first:]
        cov, drift = cov_and_drift(tail)
        constant = _constant(tail)
        settled = cov is not None and drift is not None and cov < COV_MAX and drift < DRIFT_MAX
        if not (constant or settled):
            continue
        reason = "steady" if first == 0 else f"steady from window {first + 1} of {count}"
        if cov is None or drift is None:
            reason += (f": every window's {label} is {tail[0]:g} ms, so CoV and drift are "
                       f"undefined (a mean of 0); steady by constancy")
        kept = [s for window in windows[first:] for s in window]
        start = min(s.t_send_ms for s in kept)
        state = SteadyState(
            steady=True, windows=count, steady_windows=count - first, cov_tpot_p90=cov,
            drift=drift, reason=reason, window_metric=metric)
        if first == 0:
            return Judged(state, list(samples), None)
        failed = [s for s in samples if s.outcome is not Outcome.SUCCESS
                  and s.t_send_ms >= start]
        return Judged(state, sorted([*kept, *failed], key=lambda s: s.seq), start)
    cov, drift = cov_and_drift(values)
    return Judged(SteadyState(
        steady=False, windows=count, steady_windows=0, cov_tpot_p90=cov, drift=drift,
        reason=f"never settled: CoV {_figure(cov)} (< {COV_MAX}) and drift {_figure(drift)} "
               f"(< {DRIFT_MAX}) not met over any last {MIN_WINDOWS}+ windows of {label}",
        window_metric=metric), list(samples), None)
