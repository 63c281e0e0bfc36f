"""Error budget and burn rate arithmetic, and windows without traffic."""

from __future__ import annotations

import pytest

from sustain.service.evaluation.budget import bad_fraction, budget_remaining, burn_rate, compliance


def test_burn_rate_is_the_bad_fraction_over_the_allowed_fraction() -> None:
    assert burn_rate(bad=1, total=1000, objective=0.999) == pytest.approx(1.0)
    assert burn_rate(bad=144, total=10000, objective=0.999) == pytest.approx(14.4)
    assert burn_rate(bad=0, total=50, objective=0.99) == 0.0
    assert burn_rate(bad=50, total=50, objective=0.99) == pytest.approx(100.0)


def test_budget_remaining_counts_down_from_one_and_goes_negative_when_overspent() -> None:
    assert budget_remaining(good=1000, total=1000, objective=0.99) == 1.0
    assert budget_remaining(good=995, total=1000, objective=0.99) == pytest.approx(0.5)
    assert budget_remaining(good=990, total=1000, objective=0.99) == pytest.approx(0.0)
    assert budget_remaining(good=970, total=1000, objective=0.99) == pytest.approx(-2.0)


def test_compliance_and_bad_fraction() -> None:
    assert compliance(good=997, total=1000) == pytest.approx(0.997)
    assert bad_fraction(good=997, total=1000) == pytest.approx(0.003)


@pytest.mark.parametrize("fn", [
    lambda: burn_rate(0, 0, 0.99), lambda: budget_remaining(0, 0, 0.99),
    lambda: compliance(0, 0), lambda: bad_fraction(0, 0)])
def test_a_window_without_events_has_no_value(fn: object) -> None:
    assert fn() is None  # type: ignore[operator]
