"""The run's request budget, and its closed-loop pace, go to the shards that send in a
stage."""

from __future__ import annotations

from sustain.probes.load.stages import ClosedStage, SingleStage
from sustain.probes.runner import RunBudget
from sustain.probes.workers.conductor import rate_share, request_shares
from sustain.probes.workers.shards import shard_stage


def test_shards_without_users_get_no_share_of_the_budget() -> None:
    shards = shard_stage(ClosedStage("c", 1, 10.0, 0.0), 4)
    assert request_shares(RunBudget(seconds=60, requests=100), 0, shards) == [100, 0, 0, 0]


def test_the_rest_of_the_budget_is_divided_among_the_senders() -> None:
    shards = shard_stage(ClosedStage("c", 8, 10.0, 0.0), 3)
    assert request_shares(RunBudget(seconds=60, requests=100), 40, shards) == [20, 20, 20]


def test_without_a_budget_nobody_is_limited() -> None:
    assert request_shares(None, 0, shard_stage(SingleStage(), 2)) == [None, None]


def test_the_closed_loop_pace_is_shared_among_the_shards_that_send() -> None:
    shards = shard_stage(ClosedStage("c", 2, 10.0, 0.0), 4)  # two shards get a user
    assert rate_share(RunBudget(seconds=60, requests=100, max_rate=30), shards) == 15.0
    assert rate_share(RunBudget(seconds=60, requests=100), shards) is None
    assert rate_share(None, shards) is None
