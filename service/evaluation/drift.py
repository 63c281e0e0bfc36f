"""Drift: is a metric statistic of recent runs different from a baseline, by how much, and
since when?

Inputs are run-level values (e.g. each run's p99 TTFT), oldest first. Choices, documented in
the README:
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
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["regressed", "improved", "no_change", "insufficient_data"]

MIN_RUNS = 5
MIN_AFTER = 3
"""Values needed after a change point to test it."""
ALPHA = 0.001
MIN_EFFECT = 0.05
BOOTSTRAP = 1000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class DriftReport:
    verdict: Verdict
    ratio: float | None
    """Median of recent values / median of baseline values."""
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    shift: float | None
    """Median from the change point on / median before it."""
    change_index: int | None
    """Index, in baseline + recent, of the first value of the new level; None without a
    finding."""
    baseline_runs: int
    recent_runs: int


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value that a and b come from the same distribution."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    rank_sum = sum(r for r, (_, group) in zip(ranks, pooled, strict=True) if group == 0)
    u = rank_sum - n1 * (n1 + 1) / 2
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def bootstrap_ratio(baseline: Sequence[float], recent: Sequence[float], *, rounds: int,
                    confidence: float, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    ratios = []
    for _ in range(rounds):
        b = statistics.median(rng.choices(baseline, k=len(baseline)))
        r = statistics.median(rng.choices(recent, k=len(recent)))
        if b > 0:
            ratios.append(r / b)
    ratios.sort()
    tail = (1 - confidence) / 2
    return ratios[int(tail * (len(ratios) - 1))], ratios[int((1 - tail) * (len(ratios) - 1))]


def change_point(values: Sequence[float], candidates: Sequence[int] | None = None) -> int:
    """First index of the new level, by CUSUM of log values, among `candidates` (default: any
    index but the first)."""
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    sums = [0.0]
    for value in logs:
        sums.append(sums[-1] + value - mean)
    n = len(values)
    indices = candidates if candidates is not None else range(1, n)
    return max(indices, key=lambda k: sums[k] ** 2 / (k * (n - k)))


def detect(baseline: Sequence[float], recent: Sequence[float], *, alpha: float = ALPHA,
           min_effect: float = MIN_EFFECT, min_runs: int = MIN_RUNS,
           higher_is_worse: bool = True, seed: int = 0) -> DriftReport:
    """Compare recent run-level values with a baseline (both oldest first, all > 0)."""
    if len(baseline) < min_runs or len(recent) < max(min_runs, MIN_AFTER):
        return DriftReport("insufficient_data", None, None, None, None, None, None,
                           len(baseline), len(recent))
    base_median = statistics.median(baseline)
    ratio = statistics.median(recent) / base_median if base_median > 0 else None
    low, high = bootstrap_ratio(baseline, recent, rounds=BOOTSTRAP, confidence=CONFIDENCE,
                                seed=seed)
    values = [*baseline, *recent]
    candidates = range(len(baseline), len(values) - MIN_AFTER + 1)
    k = change_point(values, candidates)
    before, after = values[:k], values[k:]
    p = min(1.0, mann_whitney_p(before, after) * len(candidates))
    shift = statistics.median(after) / statistics.median(before)
    verdict: Verdict = "no_change"
    if p < alpha and abs(shift - 1) >= min_effect:
        worse = shift > 1 if higher_is_worse else shift < 1
        verdict = "regressed" if worse else "improved"
    return DriftReport(verdict, ratio, low, high, p, shift,
                       k if verdict != "no_change" else None, len(baseline), len(recent))


def detect_against(reference: float, recent: Sequence[float], *,
                   min_effect: float = MIN_EFFECT, min_runs: int = MIN_RUNS,
                   higher_is_worse: bool = True, seed: int = 0) -> DriftReport:
    """Compare recent run-level values with one pinned run's value. With a single baseline
    value there is no rank test: a finding needs the whole bootstrap interval of
    median(recent) / reference beyond `min_effect`; the change point is searched within the
    recent runs."""
    if len(recent) < min_runs or reference <= 0:
        return DriftReport("insufficient_data", None, None, None, None, None, None, 1,
                           len(recent))
    ratio = statistics.median(recent) / reference
    low, high = bootstrap_ratio([reference], recent, rounds=BOOTSTRAP, confidence=CONFIDENCE,
                                seed=seed)
    verdict: Verdict = "no_change"
    if low >= 1 + min_effect or high <= 1 - min_effect:
        worse = ratio > 1 if higher_is_worse else ratio < 1
        verdict = "regressed" if worse else "improved"
    index = None
    if verdict != "no_change" and len(recent) > MIN_AFTER:
        index = change_point([reference, *recent], range(1, len(recent) - MIN_AFTER + 2))
    return DriftReport(verdict, ratio, low, high, None, ratio, index, 1, len(recent))
