"""Burn-rate tiers: both windows must exceed the factor, a window without traffic never
breaches, disabled tiers never fire."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sustain.service.evaluation.tiers import DEFAULT_TIERS, BurnTier, tier_breached, windows

PAGE_FAST = DEFAULT_TIERS[0]


def test_default_tiers_follow_the_sre_workbook() -> None:
    assert [(t.severity, t.factor, t.long_window_s, t.short_window_s) for t in DEFAULT_TIERS] \
        == [("page", 14.4, 3600, 300), ("page", 6.0, 21600, 1800),
            ("ticket", 3.0, 86400, 7200), ("ticket", 1.0, 259200, 21600)]
    assert windows(DEFAULT_TIERS) == [300, 1800, 3600, 7200, 21600, 86400, 259200]


@pytest.mark.parametrize(("long", "short", "breached"), [
    (15.0, 15.0, True), (15.0, 14.0, False), (14.0, 20.0, False), (14.4, 14.4, False),
    (None, 20.0, False), (20.0, None, False)])
def test_a_tier_fires_only_when_both_windows_burn_faster_than_its_factor(
        long: float | None, short: float | None, breached: bool) -> None:
    assert tier_breached(PAGE_FAST, {3600: long, 300: short}) is breached


def test_every_default_tier_fires_on_its_own_windows() -> None:
    for tier in DEFAULT_TIERS:
        rates: dict[int, float | None] = {tier.long_window_s: tier.factor * 1.01,
                                          tier.short_window_s: tier.factor * 1.01}
        assert tier_breached(tier, rates)
        rates[tier.short_window_s] = tier.factor * 0.99
        assert not tier_breached(tier, rates)


def test_a_disabled_tier_never_fires() -> None:
    tier = PAGE_FAST.model_copy(update={"enabled": False})
    assert not tier_breached(tier, {3600: 100.0, 300: 100.0})
    assert 3600 not in windows([tier])


def test_a_short_window_must_be_shorter() -> None:
    with pytest.raises(ValidationError, match="short_window_s"):
        BurnTier(name="x", severity="page", factor=2, long_window_s=60, short_window_s=60)
