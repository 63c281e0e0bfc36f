"""Error-budget arithmetic over good/total event counts (docs/metrics.md#slo-compliance).

A window with no events has no value (None): it is neither compliant nor breached, never NaN,
and never fires an alert. An objective of 1 (or more) allows no bad event at all: its error
budget is 0, so the share of it left and the rate it burns at are undefined (None), never an
infinity.
"""

from __future__ import annotations

from sustain.probes.measure.finite import ratio


def bad_fraction(good: int, total: int) -> float | None:
    """Fraction of events that were bad; None without events."""
    if total <= 0:
        return None
    return (total - good) / total


def compliance(good: int, total: int) -> float | None:
    """The SLI over the window: good / total; None without events."""
    if total <= 0:
        return None
    return good / total


def burn_rate(bad: int, total: int, objective: float) -> float | None:
    """How fast the error budget burns: (bad / total) / (1 - objective). 1.0 spends exactly
    the budget over the compliance window; None without events or without a budget (an
    objective of 1)."""
    if total <= 0:
        return None
    return ratio(bad / total, 1.0 - objective)


def budget_remaining(good: int, total: int, objective: float) -> float | None:
    """Share of the window's error budget not yet spent: 1 - bad / (total * (1 - objective)).
    1.0 is untouched, 0.0 exactly spent, negative overspent; None without events or without
    a budget (an objective of 1)."""
    if total <= 0:
        return None
    spent = ratio(total - good, total * (1.0 - objective))
    return None if spent is None else 1.0 - spent
