"""Splitting a stage over worker processes keeps the profile's load exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sustain.probes.load.stages import ClosedStage, OpenStage, SingleStage
from sustain.probes.workers.shards import next_base, shard_stage, split_count


@given(st.integers(0, 10_000), st.integers(1, 64))
def test_shares_add_up_and_differ_by_at_most_one(total: int, parts: int) -> None:
    shares = split_count(total, parts)
    assert len(shares) == parts
    assert sum(shares) == total
    assert max(shares) - min(shares) <= 1
    assert shares == sorted(shares, reverse=True)


@given(st.integers(1, 8), st.floats(1, 500), st.floats(0.1, 5), st.floats(0, 1),
       st.sampled_from([None, 0.3, 1.0, 4.0]))
def test_the_union_of_shard_arrivals_is_the_stage_schedule(
        count: int, rate: float, duration: float, warmup: float,
        burstiness: float | None) -> None:
    stage = OpenStage("s", rate, duration, warmup, max_in_flight=64, burstiness=burstiness,
                      seed=7)
    shards = shard_stage(stage, count)
    whole = list(stage.offsets())
    numbered: dict[int, float] = {}
    for shard in shards:
        for seq, offset in zip(shard.seqs(100), shard.offsets(), strict=False):
            numbered[seq] = offset
    assert sorted(numbered) == list(range(100, 100 + len(whole)))
    assert [numbered[100 + i] for i in range(len(whole))] == whole


def test_in_flight_slots_are_divided_and_each_shard_keeps_one() -> None:
    stage = OpenStage("s", 10, 1, 0, max_in_flight=10)
    assert [s.stage.max_in_flight for s in shard_stage(stage, 4)  # type: ignore[union-attr]
            ] == [3, 3, 2, 2]


def test_a_capped_open_stage_is_capped_before_it_is_split() -> None:
    stage = OpenStage("s", 100, 10, 0.5, max_in_flight=8, max_requests=25)
    union = sorted(o for shard in shard_stage(stage, 3) for o in shard.offsets())
    assert union == list(stage.offsets())
    assert sum(1 for o in union if o >= 0.5) == 25


@given(st.integers(1, 300), st.integers(1, 16), st.one_of(st.none(), st.integers(1, 1000)))
def test_closed_loop_users_and_request_caps_add_up(users: int, count: int,
                                                   cap: int | None) -> None:
    stage = ClosedStage("c", users, 5.0, 0.0, max_requests=cap)
    shards = shard_stage(stage, count)
    running = [s.stage for s in shards if isinstance(s.stage, ClosedStage)]
    assert len(running) == sum(1 for s in shards if s.stage is not None)
    assert sum(s.users for s in running) <= users
    if cap is None:
        assert sum(s.users for s in running) == users
    else:
        assert sum(s.max_requests or 0 for s in running) == cap
        assert all(s.users >= 1 for s in running)


def test_a_single_request_goes_to_the_first_shard_only() -> None:
    shards = shard_stage(SingleStage(), 3)
    assert [s.stage is not None for s in shards] == [True, False, False]


def test_the_next_stage_numbers_start_past_every_shard() -> None:
    assert next_base(10, 1, [5]) == 15
    assert next_base(10, 3, [4, 4, 3]) == 22  # shard 0's last was 10 + 0 + 3*3 = 19
    assert next_base(0, 2, []) == 0
