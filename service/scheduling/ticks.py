"""Tick arithmetic: schedules tick on multiples of the interval since the Unix epoch, so every
replica computes the same tick for the same moment (the key of the run claim)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta


def tick_of(moment: datetime, interval_s: int) -> datetime:
    """The tick that `moment` belongs to (the latest tick at or before it)."""
    epoch = moment.timestamp()
    return datetime.fromtimestamp(math.floor(epoch / interval_s) * interval_s, UTC)


def next_tick(previous_fire: datetime | None, now: datetime, interval_s: int) -> datetime:
    """The tick after the previous firing's tick, or the first tick after `now`.

    A firing may be late by its jitter (always < interval), so its tick is recovered with
    tick_of rather than by adding the interval to the firing time, which would let jitter
    accumulate and drift the schedule.
    """
    if previous_fire is None:
        return tick_of(now, interval_s) + timedelta(seconds=interval_s)
    return tick_of(previous_fire, interval_s) + timedelta(seconds=interval_s)
