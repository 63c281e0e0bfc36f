"""Ticks of interval and cron schedules, per-tick jitter, and the trigger that fires them."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sustain.service.scheduling.claims import LOAD_MARGIN, preferred
from sustain.service.scheduling.scheduler import catch_up_now
from sustain.service.scheduling.trigger import TickTrigger
from sustain.service.ticks.schedule import (
    Every,
    crontab_weekdays,
    jitter_of,
    parse_cron,
    tick_for_firing,
    ticks_between,
)

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def test_interval_ticks_are_multiples_of_the_interval_since_the_epoch() -> None:
    every = Every(15)
    fired = T0 + timedelta(seconds=22.5)
    assert every.latest_at_or_before(fired, timedelta(seconds=20)) == T0 + timedelta(seconds=15)
    assert every.next_after(fired) == T0 + timedelta(seconds=30)
    assert every.next_after(T0) == T0 + timedelta(seconds=15)
    assert every.latest_at_or_before(fired, timedelta(seconds=5)) is None


def test_cron_ticks_follow_the_expression_in_utc() -> None:
    cron = parse_cron("*/5 9-17 * * mon-fri")
    friday_evening = datetime(2026, 1, 2, 17, 57, tzinfo=UTC)
    assert cron.next_after(friday_evening) == datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    assert cron.latest_at_or_before(friday_evening, timedelta(minutes=10)) == \
        datetime(2026, 1, 2, 17, 55, tzinfo=UTC)
    assert cron.next_after(datetime(2026, 1, 5, 9, 0, tzinfo=UTC)) == \
        datetime(2026, 1, 5, 9, 5, tzinfo=UTC)
    assert parse_cron("*/5 * * * *").period_s(T0) == 300


@pytest.mark.parametrize("text", ["", "* * * *", "61 * * * *", "* * * * * *", "a b c d e"])
def test_malformed_cron_expressions_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_cron(text)


def test_jitter_is_below_the_bound_differs_per_tick_and_agrees_across_replicas() -> None:
    values = [jitter_of(7, T0 + timedelta(seconds=10 * i), 4.0) for i in range(200)]
    assert all(0 <= v < 4.0 for v in values)
    assert len(set(values)) == 200
    assert values == [jitter_of(7, T0 + timedelta(seconds=10 * i), 4.0) for i in range(200)]
    assert 1.5 < sum(values) / len(values) < 2.5
    assert jitter_of(7, T0, 0.0) == 0.0


@given(st.integers(0, 10**6), st.floats(0, 9.99))
def test_trigger_fires_each_tick_once_at_tick_plus_its_jitter(offset_s: int,
                                                                jitter_s: float) -> None:
    trigger = TickTrigger(Every(10), probe_id=3, jitter_s=jitter_s)
    now = T0 + timedelta(seconds=offset_s)
    fire = trigger.get_next_fire_time(None, now)
    seen = []
    for _ in range(5):
        tick = Every(10).latest_at_or_before(fire, timedelta(seconds=10))
        assert tick is not None
        assert fire == tick + timedelta(seconds=jitter_of(3, tick, jitter_s))
        seen.append(tick)
        fire = trigger.get_next_fire_time(fire, fire)
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(seen)] == [10] * 4
    assert seen[0] + timedelta(seconds=jitter_of(3, seen[0], jitter_s)) > now


def test_a_tick_whose_jitter_has_not_elapsed_still_fires() -> None:
    trigger = TickTrigger(Every(60), probe_id=1, jitter_s=50)
    tick = T0
    fire_at = tick + timedelta(seconds=jitter_of(1, tick, 50))
    just_before = fire_at - timedelta(milliseconds=1)
    assert trigger.get_next_fire_time(None, just_before) == fire_at


def test_ticks_between_lists_ticks_in_the_half_open_range_keeping_the_newest() -> None:
    ticks = ticks_between(Every(10), T0, T0 + timedelta(seconds=50), limit=100)
    assert ticks == [T0 + timedelta(seconds=s) for s in (10, 20, 30, 40, 50)]
    assert ticks_between(Every(10), T0, T0 + timedelta(days=1), limit=3) == \
        [T0 + timedelta(days=1, seconds=-s) for s in (20, 10, 0)]
    cron_ticks = ticks_between(parse_cron("0 * * * *"), T0, T0 + timedelta(hours=3), limit=10)
    assert cron_ticks == [T0 + timedelta(hours=h) for h in (1, 2, 3)]


def test_catch_up_runs_the_current_tick_only_early_in_its_period() -> None:
    assert catch_up_now(Every(15), T0 + timedelta(seconds=1))
    assert catch_up_now(Every(15), T0 + timedelta(seconds=7.5))
    assert not catch_up_now(Every(15), T0 + timedelta(seconds=8))


def test_a_replica_alone_claims_every_tick_first() -> None:
    assert all(preferred(probe, T0, "a", {}, in_flight=50) for probe in range(20))


def test_ticks_are_spread_evenly_over_equally_loaded_replicas() -> None:
    replicas = ["r1", "r2", "r3"]
    first: Counter[str] = Counter()
    for probe in range(20):
        for k in range(30):
            tick = T0 + timedelta(seconds=2 * k)
            chosen = [r for r in replicas
                      if preferred(probe, tick, r, {o: 0 for o in replicas if o != r})]
            assert len(chosen) == 1, "exactly one replica claims each tick first"
            first[chosen[0]] += 1
    assert all(150 <= n <= 250 for n in first.values()), first


def test_a_busier_replica_leaves_its_preferred_ticks_to_the_others() -> None:
    mine = [p for p in range(40) if preferred(p, T0, "a", {"b": 0})]
    assert mine, "some ticks prefer a"
    assert [p for p in range(40) if preferred(p, T0, "a", {"b": 2}, LOAD_MARGIN + 2)] == mine
    assert not any(preferred(p, T0, "a", {"b": 0}, LOAD_MARGIN + 1) for p in range(40))
def test_a_firing_claims_the_tick_whose_jittered_time_has_come() -> None:
    every = Every(10)
    tick = T0
    fire = tick + timedelta(seconds=jitter_of(5, tick, 9.0))
    assert tick_for_firing(every, 5, 9.0, 5.0, fire) == tick
    assert tick_for_firing(every, 5, 9.0, 5.0, fire + timedelta(seconds=4)) == tick


def test_a_late_firing_never_takes_the_next_tick_early() -> None:
    every = Every(10)
    jitter = 9.0
    probe = next(p for p in range(1000) if jitter_of(p, T0, jitter) > 8.5
                 and jitter_of(p, T0 + timedelta(seconds=10), jitter) > 2)
    fire = T0 + timedelta(seconds=jitter_of(probe, T0, jitter))
    late = fire + timedelta(seconds=2)  # past T0 + 10, before T0 + 10's own fire time
    assert tick_for_firing(every, probe, jitter, 5.0, late) == T0


def test_a_firing_later_than_the_grace_claims_nothing() -> None:
    assert tick_for_firing(Every(60), 1, 0.0, 5.0, T0 + timedelta(seconds=6)) is None
    assert tick_for_firing(Every(60), 1, 0.0, 5.0, T0 + timedelta(seconds=4)) == T0


@pytest.mark.parametrize(("field", "days"), [
    ("1-5", "mon,tue,wed,thu,fri"), ("0", "sun"), ("7", "sun"), ("5-7", "sun,fri,sat"),
    ("*/2", "sun,tue,thu,sat"), ("mon-fri", "mon,tue,wed,thu,fri"), ("1,3,5", "mon,wed,fri")])
def test_crontab_weekday_numbers_count_from_sunday(field: str, days: str) -> None:
    assert crontab_weekdays(field) == days


def test_numeric_weekdays_fire_on_the_crontab_days() -> None:
    friday_evening = datetime(2026, 1, 2, 18, 0, tzinfo=UTC)
    assert parse_cron("*/5 9-17 * * 1-5").next_after(friday_evening) == \
        datetime(2026, 1, 5, 9, 0, tzinfo=UTC), "Monday, not Saturday"
    assert parse_cron("0 12 * * 0").next_after(friday_evening) == \
        datetime(2026, 1, 4, 12, 0, tzinfo=UTC), "0 is Sunday"
