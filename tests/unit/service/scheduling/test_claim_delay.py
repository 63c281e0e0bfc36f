"""How long a replica waits before claiming a tick: never longer than MAX_CLAIM_DELAY_S,
however many peers there are, while the rendezvous order still picks one replica first and
spaces the next few apart."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

from sustain.service.scheduling.claims import (
    MAX_CLAIM_DELAY_S,
    MAX_RANK_PLACES,
    RANK_STEP_S,
    claim_delay,
)

START = datetime(2026, 12, 3, tzinfo=UTC)


def test_the_wait_is_capped_whatever_the_number_of_peers_and_their_loads() -> None:
    assert MAX_CLAIM_DELAY_S <= 0.1
    rng = random.Random(7)
    for peers in (1, 2, 5, 33, 1000, 5000):
        others = {f"agent:fake:{i}": rng.randrange(0, 3) for i in range(peers)}
        for probe_id in range(5):
            for in_flight in (0, 3, 10_000):
                delay = claim_delay(probe_id, START, "sustain-0", in_flight, others)
                assert 0.0 <= delay <= MAX_CLAIM_DELAY_S


def test_a_replica_behind_many_peers_waits_as_the_last_spaced_place() -> None:
    others = {f"r{i}": 0 for i in range(2000)}
    delays = [claim_delay(probe_id, START, "me", 0, others) for probe_id in range(50)]
    assert max(delays) == MAX_RANK_PLACES * RANK_STEP_S


def test_the_first_places_are_still_spaced_and_one_replica_goes_first() -> None:
    replicas = [f"sustain-{i}" for i in range(6)]
    first: Counter[str] = Counter()
    for k in range(60):
        tick = START + timedelta(seconds=10 * k)
        delays = {r: claim_delay(3, tick, r, 0, {o: 0 for o in replicas if o != r})
                  for r in replicas}
        ranked = sorted(delays.values())
        assert ranked[:MAX_RANK_PLACES + 1] == [p * RANK_STEP_S
                                                for p in range(MAX_RANK_PLACES + 1)]
        assert set(ranked[MAX_RANK_PLACES:]) == {MAX_RANK_PLACES * RANK_STEP_S}
        first[min(delays, key=delays.__getitem__)] += 1
    assert len(first) >= 4, "the first place moves between replicas"
