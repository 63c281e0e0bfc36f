"""Drift: is a metric statistic of recent runs different from a baseline, by how much, and
since when?

Inputs are run-level values (e.g. each run's p99 TTFT in ms), oldest first, all > 0; outputs
are ratios (unitless: the metric's unit cancels), a p-value and an index. Choices, documented
in docs/slos-and-alerting.md:
- the change point: CUSUM of log values over baseline + recent: the index k in the recent
  window that maximises S_k^2 / (k (n - k)), S_k being the cumulative deviation from the
  overall mean (the likelihood-ratio statistic of one shift in the mean; without the
  normalisation plain |S_k| is biased towards the longer segment);
- significance: the Mann-Whitney rank test (two-sided, normal approximation with tie
  correction) of the values from the change point on against all before it. Rank-based, so
  no assumption about the values' distribution and robust to the odd outlier run; the
  p-value is multiplied by the number of candidate change points (Bonferroni), since the
  split was chosen to look different. Testing from the change point, not the whole recent
  window, finds a step late in the window too. A finding needs p < alpha (default 0.001) AND
  a shift of the median at least `min_effect` (default 5 %), so noise alone does not raise it;
- the reported ratio is median(recent) / median(baseline), with a percentile-bootstrap
  confidence interval (seeded, so the same data always gives the same interval).

Cost: everything is NumPy over arrays, O(n log n) for the sorts. The bootstrap does not draw
n values per round: a resample's median depends only on how many draws land at or below each
sorted position, so its two middle order statistics are located by halving the index range,
the draws falling in the left half of a range being Binomial(draws in the range, left share)
-- the exact distribution of drawing with replacement, in about log2(n) vectorised binomial
draws per round instead of n draws and a selection. A week of one-minute runs (10,080 +
1,440 values) takes 10-20 ms (benchmarks/drift.py); callers in the service still run it off
the event loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from sustain.probes.measure.finite import finite, halfway

Verdict = Literal["regressed", "improved", "no_change", "insufficient_data"]
FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
Values: TypeAlias = Sequence[float] | FloatArray
"""Run-level values, oldest first, in the metric's unit (ms for latencies)."""

MIN_RUNS = 5
MIN_AFTER = 3
"""Values needed after a change point to test it."""
ALPHA = 0.001
MIN_EFFECT = 0.05
BOOTSTRAP = 1000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class DriftReport:
    """The verdict on one metric statistic and the figures behind it. Ratios are unitless."""

    verdict: Verdict
    ratio: float | None
    """Median of recent values / median of baseline values; None without enough data, or
    when it is past the float range (values hundreds of orders of magnitude apart; the
    verdict still holds). The other ratios are None likewise."""
    ci_low: float | None
    """Lower bound of the CONFIDENCE (95 %) percentile-bootstrap interval of `ratio`."""
    ci_high: float | None
    """Upper bound of that interval."""
    p_value: float | None
    """Rank test from the change point on, Bonferroni-corrected (two-sided); None against a
    pinned run."""
    shift: float | None
    """Median from the change point on / median before it."""
    change_index: int | None
    """Index, in baseline + recent, of the first value of the new level; None without a
    finding."""
    baseline_runs: int
    """Number of baseline values (1 against a pinned run)."""
    recent_runs: int
    """Number of recent values."""


def _positive(values: Values, name: str) -> FloatArray:
    """`values` as a float64 array; ValueError unless every value is finite and > 0 (the
    change point works on logs)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a flat sequence of values")
    if not bool(np.all(np.isfinite(array) & (array > 0))):
        raise ValueError(f"{name}: every value must be finite and > 0")
    return array


def mann_whitney_p(a: Values, b: Values) -> float:
    """Two-sided p-value that a and b come from the same distribution: the Mann-Whitney U
    test, normal approximation with continuity and tie corrections. Unit-free (ranks)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    n1, n2 = x.size, y.size
    n = n1 + n2
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = np.sort(np.concatenate([x, y]))
    # A tie group at 0-based positions i..j has the average 1-based rank (i + j) / 2 + 1,
    # i.e. (left + right + 1) / 2 with left = i and right = j + 1 the group's insertion points.
    left = np.searchsorted(pooled, x, side="left")
    right = np.searchsorted(pooled, x, side="right")
    rank_sum = float(np.sum(left + right + 1)) / 2
    starts = np.flatnonzero(np.concatenate([[True], pooled[1:] != pooled[:-1], [True]]))
    sizes = np.diff(starts).astype(np.float64)
    ties = float(np.sum(sizes**3 - sizes))
    u = rank_sum - n1 * (n1 + 1) / 2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def _resampled_median_positions(n: int, rounds: int, rng: np.random.Generator
                                 ) -> tuple[IntArray, IntArray]:
    """For each of `rounds` resamples of n positions drawn with replacement from 0..n-1, the
    positions at the two middle ranks ((n - 1) // 2 and n // 2; the same for odd n).

    Both are found by descending a binary split of 0..n-1: a range holding m draws gives its
    left half Binomial(m, left size / range size) of them, so the draws never materialise.
    The two ranks share a path until a split separates them; below it the two halves' draws
    are independent given their counts, so each rank continues on its own."""
    lo = [np.zeros(rounds, dtype=np.int64), np.zeros(rounds, dtype=np.int64)]
    hi = [np.full(rounds, n, dtype=np.int64), np.full(rounds, n, dtype=np.int64)]
    draws = [np.full(rounds, n, dtype=np.int64), np.full(rounds, n, dtype=np.int64)]
    rank = [np.full(rounds, (n - 1) // 2, dtype=np.int64),
            np.full(rounds, n // 2, dtype=np.int64)]
    while bool(np.any(hi[0] - lo[0] > 1)) or bool(np.any(hi[1] - lo[1] > 1)):
        together = (lo[0] == lo[1]) & (hi[0] == hi[1])
        mids = []
        lefts = []
        for i in (0, 1):
            size = hi[i] - lo[i]
            mid = lo[i] + size // 2
            mids.append(mid)
            lefts.append(rng.binomial(draws[i], (mid - lo[i]) / size).astype(np.int64))
        lefts[1] = np.where(together, lefts[0], lefts[1])
        for i in (0, 1):
            go_left = rank[i] < lefts[i]
            hi[i] = np.where(go_left, mids[i], hi[i])
            lo[i] = np.where(go_left, lo[i], mids[i])
            rank[i] = np.where(go_left, rank[i], rank[i] - lefts[i])
            draws[i] = np.where(go_left, lefts[i], draws[i] - lefts[i])
    return lo[0], lo[1]


def bootstrap_medians(values: Values, rounds: int, rng: np.random.Generator) -> FloatArray:
    """The medians of `rounds` resamples of `values` drawn with replacement (same length,
    same unit as `values`), with the distribution of drawing them one by one."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    if ordered.size == 0:
        raise ValueError("cannot resample no values")
    low, high = _resampled_median_positions(ordered.size, rounds, rng)
    lower, upper = ordered[low], ordered[high]
    with np.errstate(over="ignore"):
        medians: FloatArray = (lower + upper) / 2
    overflowed = ~np.isfinite(medians)
    if bool(np.any(overflowed)):  # a sum near the float maximum: halve first (exact there)
        medians[overflowed] = lower[overflowed] / 2 + upper[overflowed] / 2
    return medians


def _bootstrap_bounds(baseline: Values, recent: Values, *, rounds: int, confidence: float,
                      seed: int) -> tuple[float, float]:
    """bootstrap_ratio's bounds as computed: +inf for a bound past the float range, which
    still compares as the verdict needs (a ratio that large is beyond any effect)."""
    rng = np.random.default_rng(seed)
    base = bootstrap_medians(baseline, rounds, rng)
    new = bootstrap_medians(recent, rounds, rng)
    keep = base > 0
    with np.errstate(over="ignore"):
        ratios = np.sort(new[keep] / base[keep])
    if ratios.size == 0:
        raise ValueError("no bootstrap round had a baseline median > 0")
    tail = (1 - confidence) / 2
    last = ratios.size - 1
    return float(ratios[int(tail * last)]), float(ratios[int((1 - tail) * last)])


def bootstrap_ratio(baseline: Values, recent: Values, *, rounds: int, confidence: float,
                    seed: int) -> tuple[float | None, float | None]:
    """Percentile-bootstrap interval, at `confidence` (e.g. 0.95), of median(recent) /
    median(baseline) (unitless), from `rounds` resamples of each; deterministic for a seed.
    Rounds whose baseline median is not > 0 are left out. A bound is None when it is past
    the float range (values hundreds of orders of magnitude apart)."""
    low, high = _bootstrap_bounds(baseline, recent, rounds=rounds, confidence=confidence,
                                  seed=seed)
    return finite(low), finite(high)


def change_point(values: Values, candidates: Sequence[int] | None = None) -> int:
    """First index of the new level, by CUSUM of log values (all > 0), among `candidates`
    (default: any index but the first); the first of equally good ones."""
    logs = np.log(_positive(values, "values"))
    n = logs.size
    sums = np.concatenate([[0.0], np.cumsum(logs - float(np.mean(logs)))])
    if candidates is None:
        indices = np.arange(1, n, dtype=np.int64)
    elif isinstance(candidates, range):
        indices = np.arange(candidates.start, candidates.stop, candidates.step, dtype=np.int64)
    else:
        indices = np.asarray(candidates, dtype=np.int64)
    if indices.size == 0:
        raise ValueError("no candidate change point")
    score = sums[indices] ** 2 / (indices * (n - indices))
    return int(indices[int(np.argmax(score))])


def _median(values: FloatArray) -> float:
    """The median of finite values (their unit): np.median's, without its overflow to an
    infinity when the two middle values sum past the float maximum."""
    ordered = np.sort(values)
    n = ordered.size
    return halfway(float(ordered[(n - 1) // 2]), float(ordered[n // 2]))


def detect(baseline: Values, recent: Values, *, alpha: float = ALPHA,
           min_effect: float = MIN_EFFECT, min_runs: int = MIN_RUNS,
           higher_is_worse: bool = True, seed: int = 0) -> DriftReport:
    """Compare recent run-level values with a baseline (both oldest first, all > 0, in the
    metric's unit, e.g. ms). `min_effect` is a fraction of the median (0.05: 5 %); `seed`
    makes the bootstrap interval reproducible. ValueError on a value that is not > 0."""
    if len(baseline) < min_runs or len(recent) < max(min_runs, MIN_AFTER):
        return DriftReport("insufficient_data", None, None, None, None, None, None,
                           len(baseline), len(recent))
    base = _positive(baseline, "baseline")
    new = _positive(recent, "recent")
    ratio = _median(new) / _median(base)
    low, high = _bootstrap_bounds(base, new, rounds=BOOTSTRAP, confidence=CONFIDENCE,
                                  seed=seed)
    values = np.concatenate([base, new])
    candidates = range(base.size, values.size - MIN_AFTER + 1)
    k = change_point(values, candidates)
    before, after = values[:k], values[k:]
    p = min(1.0, mann_whitney_p(before, after) * len(candidates))
    shift = _median(after) / _median(before)
    verdict: Verdict = "no_change"
    if p < alpha and abs(shift - 1) >= min_effect:
        worse = shift > 1 if higher_is_worse else shift < 1
        verdict = "regressed" if worse else "improved"
    return DriftReport(verdict, finite(ratio), finite(low), finite(high), p, finite(shift),
                       k if verdict != "no_change" else None, base.size, new.size)


def detect_against(reference: float, recent: Values, *,
                   min_effect: float = MIN_EFFECT, min_runs: int = MIN_RUNS,
                   higher_is_worse: bool = True, seed: int = 0) -> DriftReport:
    """Compare recent run-level values with one pinned run's value (same unit, all > 0).
    With a single baseline value there is no rank test: a finding needs the whole bootstrap
    interval of median(recent) / reference beyond `min_effect`; the change point is searched
    within the recent runs (its index counts the reference as index 0)."""
    if len(recent) < min_runs or reference <= 0:
        return DriftReport("insufficient_data", None, None, None, None, None, None, 1,
                           len(recent))
    _positive([reference], "reference")
    new = _positive(recent, "recent")
    ratio = _median(new) / reference
    low, high = _bootstrap_bounds([reference], new, rounds=BOOTSTRAP, confidence=CONFIDENCE,
                                  seed=seed)
    verdict: Verdict = "no_change"
    if low >= 1 + min_effect or high <= 1 - min_effect:
        worse = ratio > 1 if higher_is_worse else ratio < 1
        verdict = "regressed" if worse else "improved"
    index = None
    if verdict != "no_change" and new.size > MIN_AFTER:
        index = change_point(np.concatenate([[reference], new]),
                             range(1, new.size - MIN_AFTER + 2))
    return DriftReport(verdict, finite(ratio), finite(low), finite(high), None, finite(ratio),
                       index, 1, new.size)
