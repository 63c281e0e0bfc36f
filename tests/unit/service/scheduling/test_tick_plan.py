"""The plan of upcoming firings that ticks are claimed ahead from: a replica takes its
preferred ticks at the full lead and the others' at half of it, every tick once, each probe's
following tick only in a later batch, and nothing of a probe it forgot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sustain.service.scheduling.ahead import LEAD_S, TickPlan, Upcoming, lead_of
from sustain.service.scheduling.claims import preferred
from sustain.service.scheduling.trigger import TickTrigger
from sustain.service.ticks.schedule import Every, jitter_of

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
ME = "r1"
PEERS = {"r2": 0}


def plan_of(probe_ids: range, interval_s: int = 60, jitter_s: float = 0.0) -> TickPlan:
    plan = TickPlan()
    for probe_id in probe_ids:
        plan.track(probe_id, TickTrigger(Every(interval_s), probe_id, jitter_s), 5.0,
                   interval_s, T0)
    return plan


def take(plan: TickPlan, at: datetime) -> list[Upcoming]:
    return plan.due(at, ME, PEERS, 0)


def test_preferred_ticks_come_at_the_lead_and_the_others_at_half_of_it() -> None:
    plan = plan_of(range(1, 41))
    tick = T0 + timedelta(seconds=60)
    mine = {p for p in range(1, 41) if preferred(p, tick, ME, PEERS)}
    assert 0 < len(mine) < 40
    assert take(plan, tick - timedelta(seconds=LEAD_S + 0.01)) == []
    early = take(plan, tick - timedelta(seconds=LEAD_S))
    assert {u.probe_id for u in early} == mine
    assert take(plan, tick - timedelta(seconds=LEAD_S / 2 + 0.01)) == []
    swept = take(plan, tick - timedelta(seconds=LEAD_S / 2))
    assert {u.probe_id for u in swept} == set(range(1, 41)) - mine
    assert all(u.tick == tick and u.fire_at == tick for u in early + swept)


def test_every_tick_is_taken_once_and_the_next_one_only_by_a_later_call() -> None:
    plan = plan_of(range(1, 6), interval_s=10)
    taken: list[Upcoming] = []
    moment = T0
    while moment < T0 + timedelta(seconds=60):
        batch = take(plan, moment)
        assert len({u.probe_id for u in batch}) == len(batch), "one tick per probe a batch"
        taken.extend(batch)
        moment += timedelta(seconds=0.2)
    keys = [u.key for u in taken]
    assert len(keys) == len(set(keys))
    expected = {(p, T0 + timedelta(seconds=10 * k)) for p in range(1, 6) for k in range(1, 7)}
    assert expected <= set(keys)


def test_a_tick_is_planned_at_its_jittered_firing() -> None:
    plan = plan_of(range(7, 8), jitter_s=30.0)
    for tick in (T0, T0 + timedelta(seconds=60)):  # T0's own firing is still to come
        fire_at = tick + timedelta(seconds=jitter_of(7, tick, 30.0))
        assert fire_at > T0
        (upcoming,) = take(plan, fire_at)
        assert upcoming.tick == tick
        assert upcoming.fire_at == fire_at


def test_a_forgotten_or_replanned_probe_leaves_no_stale_tick() -> None:
    plan = plan_of(range(1, 4))
    plan.forget(2)
    plan.track(3, TickTrigger(Every(120), 3), 5.0, 120, T0)
    batch = take(plan, T0 + timedelta(seconds=61))
    assert {u.probe_id for u in batch} == {1}
    later = take(plan, T0 + timedelta(seconds=121))
    assert {u.key for u in later} == {(1, T0 + timedelta(seconds=120)),
                                      (3, T0 + timedelta(seconds=120))}


def test_a_short_interval_is_claimed_a_quarter_period_ahead() -> None:
    assert lead_of(60) == LEAD_S
    assert lead_of(2) == 0.5
    plan = plan_of(range(1, 2), interval_s=2)
    first = T0 + timedelta(seconds=2)
    assert take(plan, first - timedelta(seconds=0.51)) == []
    assert [u.tick for u in take(plan, first)] == [first]
