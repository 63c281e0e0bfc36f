"""An APScheduler trigger that keeps ticks on epoch multiples of the interval."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from apscheduler.triggers.base import BaseTrigger

from service.scheduling.ticks import next_tick


class AlignedIntervalTrigger(BaseTrigger):  # type: ignore[misc]
    """Fires at each tick plus a fresh random delay in [0, jitter_s).

    APScheduler's IntervalTrigger counts from the previous (jittered) firing, so its schedule
    drifts by half the jitter per period and never lines up across replicas; this one does not.
    """

    __slots__ = ("interval_s", "jitter_s")

    def __init__(self, interval_s: int, jitter_s: float = 0.0) -> None:
        if not 0 <= jitter_s < interval_s:
            raise ValueError("jitter must be at least 0 and smaller than the interval")
        self.interval_s = interval_s
        self.jitter_s = jitter_s

    def get_next_fire_time(self, previous_fire_time: datetime | None,
                           now: datetime) -> datetime:
        tick = next_tick(previous_fire_time, now, self.interval_s)
        if self.jitter_s:
            tick += timedelta(seconds=random.uniform(0, self.jitter_s))
        return tick

    def __repr__(self) -> str:
        return f"AlignedIntervalTrigger(interval_s={self.interval_s}, jitter_s={self.jitter_s})"
