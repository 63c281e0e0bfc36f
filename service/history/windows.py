"""Time windows for history queries: durations like `1h`, step-aligned windows, and the cover
of a window by daily rollups, hourly rollups and single runs (pure functions)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HOUR_S = 3600
DAY_S = 86400
MAX_POINTS = 10_000

_DURATION = re.compile(r"^(\d{1,7})(s|m|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "h": HOUR_S, "d": DAY_S, "w": 7 * DAY_S}


def parse_duration(text: str) -> int:
    """`30s`, `5m`, `1h`, `30d`, `2w` -> seconds. ValueError on anything else."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError("expected a number and a unit s, m, h, d or w, e.g. 1h or 30d")
    seconds = int(match[1]) * _UNIT_S[match[2]]
    if seconds <= 0:
        raise ValueError("must be positive")
    return seconds


def epoch_seconds(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(seconds=1)


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def aligned_windows(start: datetime, end: datetime, step_s: int) -> list[tuple[int, int]]:
    """The [a, b) windows, in epoch seconds, of length step_s aligned on multiples of step_s
    since the epoch (so hourly steps fall on whole UTC hours), that overlap [start, end)."""
    first = epoch_seconds(start) // step_s * step_s
    last = epoch_seconds(end)
    return [(a, a + step_s) for a in range(first, last, step_s)]


def point_count(start: datetime, end: datetime, step_s: int) -> int:
    first = epoch_seconds(start) // step_s * step_s
    return max(0, -(-(epoch_seconds(end) - first) // step_s))


@dataclass(slots=True)
class Cover:
    """[a, b) as whole UTC days, whole hours and leftover run ranges (epoch seconds)."""

    days: list[int] = field(default_factory=list)
    hours: list[int] = field(default_factory=list)
    runs: list[tuple[float, float]] = field(default_factory=list)


def cover(a: float, b: float) -> Cover:
    """Largest pieces first: a 30-day window is about 29 days, 46 hours and two partial hours
    read run by run, instead of 43,200 runs."""
    result = Cover()
    if b <= a:
        return result
    hour_a, hour_b = _ceil(a, HOUR_S), _floor(b, HOUR_S)
    if hour_a >= hour_b:
        result.runs.append((a, b))
        return result
    day_a, day_b = _ceil(hour_a, DAY_S), _floor(hour_b, DAY_S)
    if day_a < day_b:
        result.days = list(range(day_a, day_b, DAY_S))
        result.hours = [*range(hour_a, day_a, HOUR_S), *range(day_b, hour_b, HOUR_S)]
    else:
        result.hours = list(range(hour_a, hour_b, HOUR_S))
    if a < hour_a:
        result.runs.append((a, hour_a))
    if hour_b < b:
        result.runs.append((hour_b, b))
    return result


def _ceil(value: float, unit: int) -> int:
    return -int(-value // unit) * unit


def _floor(value: float, unit: int) -> int:
    return int(value // unit) * unit
