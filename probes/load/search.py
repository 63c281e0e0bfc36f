"""The capacity search, as plain data: which load level to measure next, given the verdicts so
far (as AIPerf's SLA search does: double until a level fails, then bisect). Levels are
integers (users or requests per second); every measured level is reused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bracket:
    highest_passing: int | None
    """The highest passing level below every failing one; None when the first failed."""
    lowest_failing: int | None
    """The lowest failing level; None when none failed (the maximum passed)."""


def bracket(verdicts: Mapping[int, bool]) -> Bracket:
    """Where capacity lies: the lowest failing level, and the highest passing level below it
    (a passing level above a failing one is noise, not capacity)."""
    failing = min((level for level, ok in verdicts.items() if not ok), default=None)
    passing = [level for level, ok in verdicts.items()
               if ok and (failing is None or level < failing)]
    return Bracket(max(passing, default=None), failing)


def next_level(verdicts: Mapping[int, bool], minimum: int, maximum: int) -> int | None:
    """The next level to measure, or None once capacity is known to the integer: `minimum`
    first; while everything passed, double (up to `maximum`); then the midpoint between the
    highest passing and the lowest failing level."""
    if minimum not in verdicts:
        return minimum
    found = bracket(verdicts)
    if found.highest_passing is None:
        return None  # the lowest level fails: there is no capacity under the SLO
    if found.lowest_failing is None:
        if found.highest_passing >= maximum:
            return None
        return min(2 * found.highest_passing, maximum)
    if found.lowest_failing - found.highest_passing <= 1:
        return None
    return (found.highest_passing + found.lowest_failing) // 2
