"""When a probe's ticks fall: every N seconds since the Unix epoch, or a cron expression (UTC).

Pure time arithmetic that every replica computes identically, because a tick's time is the
key of its run claim (probe_id, scheduled_for). Jitter is derived from the probe and the tick
(a hash), not drawn per replica: every replica fires a tick at the same instant, so the claim
goes to the least-loaded replica rather than to whichever drew the smallest delay, and the
delay of any run can be recomputed afterwards.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from apscheduler.triggers.cron import CronTrigger

EPSILON = timedelta(microseconds=1)
CRON_REFERENCE = datetime(2001, 1, 1, tzinfo=UTC)
"""A Monday: cron gaps are measured from here, so an expression always gives the same."""


class Schedule(Protocol):
    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after `moment`."""
        ...

    def latest_at_or_before(self, moment: datetime, horizon: timedelta) -> datetime | None:
        """The last tick at or before `moment` and after `moment - horizon`, if any."""
        ...

    def period_s(self, moment: datetime) -> float:
        """Seconds between the two ticks after `moment` (the interval, for an interval)."""
        ...


@dataclass(frozen=True, slots=True)
class Every:
    interval_s: int

    def next_after(self, moment: datetime) -> datetime:
        n = math.floor(moment.timestamp() / self.interval_s) + 1
        return datetime.fromtimestamp(n * self.interval_s, UTC)

    def latest_at_or_before(self, moment: datetime, horizon: timedelta) -> datetime | None:
        tick = datetime.fromtimestamp(
            math.floor(moment.timestamp() / self.interval_s) * self.interval_s, UTC)
        return tick if tick > moment - horizon else None

    def period_s(self, moment: datetime) -> float:  # noqa: ARG002 - the same at any moment
        return float(self.interval_s)


@dataclass(frozen=True, slots=True)
class Cron:
    """A five-field crontab expression (minute hour day month day-of-week), evaluated in UTC."""

    expression: str

    def __post_init__(self) -> None:
        self._trigger()  # raises ValueError on a malformed expression

    def _trigger(self) -> CronTrigger:
        minute, hour, day, month, weekday = self.expression.split()
        return CronTrigger(minute=minute, hour=hour, day=day, month=month,
                           day_of_week=crontab_weekdays(weekday), timezone=UTC)

    def next_after(self, moment: datetime) -> datetime:
        fire: datetime | None = self._trigger().get_next_fire_time(None, moment + EPSILON)
        if fire is None:
            raise ValueError(f"cron {self.expression!r} never fires after {moment}")
        return fire.astimezone(UTC)

    def latest_at_or_before(self, moment: datetime, horizon: timedelta) -> datetime | None:
        found = None
        tick = self.next_after(moment - horizon)
        while tick <= moment:
            found = tick
            tick = self.next_after(tick)
        return found

    def period_s(self, moment: datetime) -> float:
        first = self.next_after(moment)
        return (self.next_after(first) - first).total_seconds()

    def shortest_gap_s(self, ticks: int = 20) -> float:
        """The shortest gap between ticks over a sample of them (for irregular expressions)."""
        tick, gaps = self.next_after(CRON_REFERENCE), []
        for _ in range(ticks):
            following = self.next_after(tick)
            gaps.append((following - tick).total_seconds())
            tick = following
        return min(gaps)


WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def crontab_weekdays(field: str) -> str:
    """A crontab weekday field (0 or 7 = Sunday, 1 = Monday, ranges, steps, names) as
    APScheduler's names. APScheduler 3 reads weekday *numbers* with Monday = 0, so `1-5`
    passed through would mean Tuesday to Saturday."""
    days: set[int] = set()
    for part in field.lower().split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if span == "*":
            first, last = 0, 6
        else:
            low, _, high = span.partition("-")
            first = _weekday(low)
            last = _weekday(high) if high else (6 if step_text else first)
            if high and last == 0:
                last = 7  # ... through Sunday (7 or sun)
        if step < 1 or last < first:
            raise ValueError(f"weekday field {field!r}: bad range {part!r}")
        days.update(d % 7 for d in range(first, last + 1, step))
    return ",".join(WEEKDAYS[d] for d in sorted(days))


def _weekday_number(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _weekday(text: str) -> int:
    number = _weekday_number(text)
    if number is not None:
        if number > 7:
            raise ValueError(f"weekday {text!r}: use 0-7 (0 and 7 are Sunday)")
        return number % 7
    if text[:3] in WEEKDAYS:
        return WEEKDAYS.index(text[:3])
    raise ValueError(f"weekday {text!r}: use 0-7 or sun..sat")


def parse_cron(expression: str) -> Cron:
    """A Cron, or ValueError naming what is wrong."""
    if len(expression.split()) != 5:
        raise ValueError("a cron expression has five fields: minute hour day month weekday")
    return Cron(expression)


def jitter_of(probe_id: int, tick: datetime, jitter_s: float) -> float:
    """Seconds in [0, jitter_s) that this probe's run of this tick is delayed by; a fresh
    pseudo-random value per tick, the same on every replica."""
    if jitter_s <= 0:
        return 0.0
    digest = hashlib.blake2b(f"{probe_id}:{tick.timestamp():.6f}".encode(), digest_size=8)
    return jitter_s * int.from_bytes(digest.digest(), "big") / 2**64


def ticks_between(schedule: Schedule, after: datetime, until: datetime, limit: int
                  ) -> list[datetime]:
    """Ticks in (after, until], oldest first, at most `limit` (the newest are kept)."""
    gap = schedule.shortest_gap_s() if isinstance(schedule, Cron) else schedule.period_s(until)
    after = max(after, until - timedelta(seconds=gap * (limit + 1)))
    ticks: list[datetime] = []
    tick = schedule.next_after(after)
    while tick <= until:
        ticks.append(tick)
        if len(ticks) > limit:
            ticks.pop(0)
        tick = schedule.next_after(tick)
    return ticks


def tick_for_firing(schedule: Schedule, probe_id: int, jitter_s: float, grace_s: float,
                    now: datetime) -> datetime | None:
    """The tick a firing at `now` is for: the latest tick whose jittered fire time has come,
    if that was at most `grace_s` ago (a late firing never takes the next tick early)."""
    horizon = timedelta(seconds=jitter_s + grace_s + 1)
    tick = schedule.latest_at_or_before(now, horizon)
    if tick is not None and tick + timedelta(seconds=jitter_of(probe_id, tick, jitter_s)) > now:
        tick = schedule.latest_at_or_before(tick - EPSILON, horizon)
    if tick is None:
        return None
    late = now - tick - timedelta(seconds=jitter_of(probe_id, tick, jitter_s))
    return tick if late.total_seconds() <= grace_s else None
