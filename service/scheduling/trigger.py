"""An APScheduler trigger that fires each tick of a Schedule, delayed by the tick's jitter."""

from __future__ import annotations

from datetime import datetime, timedelta

from apscheduler.triggers.base import BaseTrigger

from sustain.service.ticks.schedule import Schedule, jitter_of


class TickTrigger(BaseTrigger):  # type: ignore[misc]
    """Fires at tick + jitter_of(probe, tick) for each tick of the schedule.

    Ticks come from the schedule, never from the previous (jittered) firing plus an interval,
    so the schedule cannot drift and every replica fires the same tick at the same instant.
    """

    __slots__ = ("jitter_s", "probe_id", "schedule")

    def __init__(self, schedule: Schedule, probe_id: int, jitter_s: float = 0.0) -> None:
        self.schedule = schedule
        self.probe_id = probe_id
        self.jitter_s = jitter_s

    def fire_time(self, tick: datetime) -> datetime:
        return tick + timedelta(seconds=jitter_of(self.probe_id, tick, self.jitter_s))

    def upcoming_tick(self, now: datetime) -> datetime:
        """The tick whose (jittered) firing is the first after `now`: the current tick while
        its jitter has not yet passed, else the next one."""
        current = self.schedule.latest_at_or_before(now, timedelta(seconds=self.jitter_s + 1))
        if current is not None and self.fire_time(current) > now:
            return current
        return self.schedule.next_after(now)

    def get_next_fire_time(self, previous_fire_time: datetime | None,
                           now: datetime) -> datetime:
        if previous_fire_time is None:
            return self.fire_time(self.upcoming_tick(now))
        horizon = timedelta(seconds=self.jitter_s + 1)
        previous = self.schedule.latest_at_or_before(previous_fire_time, horizon)
        after = previous if previous is not None else previous_fire_time
        return self.fire_time(self.schedule.next_after(after))

    def __repr__(self) -> str:
        return f"TickTrigger({self.schedule!r}, probe_id={self.probe_id}, " \
               f"jitter_s={self.jitter_s})"
