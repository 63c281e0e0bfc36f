"""An SLO's status from its windowed counts: budget over the compliance window, burn rate per
window, and which tiers breach now. Pure: counts in, figures out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sustain.service.evaluation.budget import budget_remaining, burn_rate, compliance
from sustain.service.evaluation.tiers import BurnTier, tier_breached


@dataclass(frozen=True, slots=True)
class WindowFigures:
    window_s: int
    good: int
    total: int
    burn_rate: float | None


@dataclass(frozen=True, slots=True)
class SloStatus:
    objective: float
    window_s: int
    good: int
    total: int
    compliance: float | None
    budget_remaining: float | None
    windows: list[WindowFigures]
    breached_tiers: list[str]


def needed_windows(window_s: int, tiers: Sequence[BurnTier]) -> list[int]:
    return sorted({window_s, *(w for t in tiers if t.enabled
                               for w in (t.long_window_s, t.short_window_s))})


def status(objective: float, window_s: int, tiers: Sequence[BurnTier],
           counts: Mapping[int, tuple[int, int]]) -> SloStatus:
    """`counts` maps each window of needed_windows() to its (good, total)."""
    figures = [WindowFigures(w, good, total, burn_rate(total - good, total, objective))
               for w, (good, total) in sorted(counts.items())]
    rates = {f.window_s: f.burn_rate for f in figures}
    good, total = counts.get(window_s, (0, 0))
    return SloStatus(
        objective=objective, window_s=window_s, good=good, total=total,
        compliance=compliance(good, total),
        budget_remaining=budget_remaining(good, total, objective),
        windows=figures,
        breached_tiers=[t.name for t in tiers if tier_breached(t, rates)])


def window_label(seconds: int) -> str:
    """5m, 1h, 6h, 1d, 28d: the shortest exact unit, for metric labels."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
