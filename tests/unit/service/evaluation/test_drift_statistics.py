"""The vectorised drift statistics: a week of one-minute runs with a 10 % step is regressed,
the bootstrap's resampled medians have the distribution of drawing values one by one, the
interval is the same for the same seed, the rank test averages tied ranks, and values that
are not > 0 are refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sustain.service.evaluation.drift import (
    bootstrap_medians,
    bootstrap_ratio,
    detect,
    detect_against,
    mann_whitney_p,
)

WEEK, DAY = 7 * 24 * 60, 24 * 60


def week_of_runs(step: float, step_at: int, seed: int) -> np.ndarray:
    """One-minute p99s in ms (5 % lognormal noise around 250 ms): a week, then a day whose
    runs from `step_at` on are multiplied by `step`."""
    rng = np.random.default_rng(seed)
    values = 250.0 * rng.lognormal(0, 0.05, WEEK + DAY)
    values[step_at:] *= step
    return values


def test_a_ten_percent_shift_is_regressed_from_its_first_run() -> None:
    values = week_of_runs(1.1, WEEK + 600, seed=1)
    report = detect(values[:WEEK], values[WEEK:])
    assert report.verdict == "regressed"
    assert report.change_index is not None
    assert abs(report.change_index - (WEEK + 600)) <= 2
    assert report.shift == pytest.approx(1.1, rel=0.01)
    assert report.ci_low is not None
    assert report.ci_high is not None
    assert report.ratio is not None
    assert report.ci_low <= report.ratio <= report.ci_high
    assert (report.baseline_runs, report.recent_runs) == (WEEK, DAY)


def test_a_flat_week_shows_no_change() -> None:
    values = week_of_runs(1.0, WEEK, seed=2)
    report = detect(list(values[:WEEK]), list(values[WEEK:]))
    assert report.verdict == "no_change"
    assert report.change_index is None


def test_a_ten_percent_improvement_of_a_higher_is_better_statistic_is_improved() -> None:
    values = week_of_runs(1.1, WEEK + 100, seed=3)
    assert detect(values[:WEEK], values[WEEK:], higher_is_worse=False).verdict == "improved"


@pytest.mark.parametrize("n", [1, 2, 7, 8])
def test_resampled_medians_have_the_distribution_of_drawing_values_one_by_one(n: int) -> None:
    values = np.arange(1.0, n + 1.0) ** 2  # distinct, unevenly spaced
    rounds = 100_000
    fast = bootstrap_medians(values, rounds, np.random.default_rng(11))
    drawn = np.median(values[np.random.default_rng(12).integers(0, n, (rounds, n))], axis=1)
    support = np.union1d(fast, drawn)
    gap = max(abs(np.mean(fast <= v) - np.mean(drawn <= v)) for v in support)
    assert gap < 0.01  # the two CDFs agree within sampling noise (about 0.002 here)


def test_the_bootstrap_interval_is_the_same_for_the_same_seed() -> None:
    values = week_of_runs(1.2, WEEK + 300, seed=4)
    first = bootstrap_ratio(values[:WEEK], values[WEEK:], rounds=1000, confidence=0.95, seed=3)
    again = bootstrap_ratio(values[:WEEK], values[WEEK:], rounds=1000, confidence=0.95, seed=3)
    other = bootstrap_ratio(values[:WEEK], values[WEEK:], rounds=1000, confidence=0.95, seed=4)
    assert first == again
    assert first != other
    assert first[0] is not None
    assert first[1] is not None
    assert first[0] < float(np.median(values[WEEK:]) / np.median(values[:WEEK])) < first[1]


def test_the_rank_test_gives_tied_values_their_average_rank() -> None:
    # pooled 1 1 2 2 3 3: ranks 1.5 1.5 3.5 3.5 5.5 5.5; U = 6.5 - 6 = 0.5; three pairs of
    # ties: variance = 9 / 12 * (7 - 18 / 30) = 4.8; z = (|0.5 - 4.5| - 0.5) / sqrt(4.8)
    expected = math.erfc(3.5 / math.sqrt(4.8) / math.sqrt(2))
    assert mann_whitney_p([1, 1, 2], [2, 3, 3]) == pytest.approx(expected, rel=1e-12)
    assert mann_whitney_p([2, 3, 3], [1, 1, 2]) == pytest.approx(expected, rel=1e-12)


def test_a_step_against_a_pinned_run_is_regressed_from_the_run_where_it_began() -> None:
    recent = [100.0] * 3 + [125.0] * 13
    report = detect_against(100.0, recent)
    assert report.verdict == "regressed"
    assert report.ratio == pytest.approx(1.25)
    assert report.p_value is None
    assert report.change_index == 4  # index 0 is the pinned run


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_values_that_are_not_positive_and_finite_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and > 0"):
        detect([1.0] * 10, [1.0] * 9 + [bad])
