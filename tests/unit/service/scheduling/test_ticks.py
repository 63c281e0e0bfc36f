"""Ticks stay on epoch multiples of the interval, whatever the jitter, for ever."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from service.scheduling.scheduler import catch_up_now
from service.scheduling.ticks import next_tick, tick_of
from service.scheduling.trigger import AlignedIntervalTrigger


def test_ticks_sit_on_interval_multiples_since_the_epoch() -> None:
    fired = datetime(2026, 1, 1, 12, 0, 17, 400_000, tzinfo=UTC)
    assert tick_of(fired, 15) == datetime(2026, 1, 1, 12, 0, 15, tzinfo=UTC)
    assert tick_of(fired, 60) == datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert next_tick(None, fired, 15) == datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    assert next_tick(fired, fired, 15) == datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


def test_jitter_delays_each_firing_but_never_accumulates() -> None:
    trigger = AlignedIntervalTrigger(10, jitter_s=9.0)
    now = datetime(2026, 3, 1, 8, 0, 3, tzinfo=UTC)
    fire = trigger.get_next_fire_time(None, now)
    ticks = []
    for _ in range(1000):
        tick = tick_of(fire, 10)
        assert timedelta(0) <= fire - tick < timedelta(seconds=9)
        ticks.append(tick)
        fire = trigger.get_next_fire_time(fire, fire)
    assert ticks[0] == datetime(2026, 3, 1, 8, 0, 10, tzinfo=UTC)
    assert all(b - a == timedelta(seconds=10) for a, b in itertools.pairwise(ticks))


def test_jitter_must_be_smaller_than_the_interval() -> None:
    with pytest.raises(ValueError, match="smaller than the interval"):
        AlignedIntervalTrigger(10, jitter_s=10)


def test_the_current_tick_is_caught_up_only_when_the_next_is_not_near() -> None:
    tick = datetime(2026, 3, 1, 8, 0, 0, tzinfo=UTC)
    assert catch_up_now(tick + timedelta(seconds=1), 15)
    assert catch_up_now(tick + timedelta(seconds=7.5), 15)
    assert not catch_up_now(tick + timedelta(seconds=8), 15)
