"""An SLO's status from its windowed counts: budget over the compliance window, burn rate per
window, and which tiers breach now. Pure: counts in, figures out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

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


def across_locations(counts: Mapping[str, Mapping[int, tuple[int, int]]],
                     windows_s: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(good, total) of each window over every location together."""
    return {w: (sum(c.get(w, (0, 0))[0] for c in counts.values()),
                sum(c.get(w, (0, 0))[1] for c in counts.values())) for w in windows_s}


def in_each_location(objective: float, window_s: int, tiers: Sequence[BurnTier],
                     counts: Mapping[str, Mapping[int, tuple[int, int]]]
                     ) -> dict[str, SloStatus]:
    """The SLO's status in each location, from each location's windowed counts."""
    needed = needed_windows(window_s, tiers)
    return {location: status(objective, window_s, tiers,
                             {w: windows.get(w, (0, 0)) for w in needed})
            for location, windows in sorted(counts.items())}


def breaching(by_location: Mapping[str, SloStatus], tier: str) -> list[str]:
    """The locations where `tier` breaches on their own."""
    return [location for location, found in by_location.items()
            if tier in found.breached_tiers]


def judged(across: SloStatus, by_location: Mapping[str, SloStatus], mode: str,
           min_locations: int, tiers: Sequence[BurnTier]) -> SloStatus:
    """The SLO's status as it states it is judged: `across` every location's events together
    (as counted), or in `each` location, a tier breaching when at least `min_locations`
    locations breach it on their own (so one location's trouble alone need not page)."""
    if mode != "each":
        return across
    return replace(across, breached_tiers=[
        t.name for t in tiers if len(breaching(by_location, t.name)) >= min_locations])
