"""Who runs a tick while the database cannot decide: exactly one of the replicas that share
a view of who is alive, spread evenly over them."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from sustain.service.scheduling.claims import tick_owner

REPLICAS = ("sustain-0", "sustain-1", "sustain-2")
START = datetime(2026, 12, 3, tzinfo=UTC)


def owners(probe_id: int, tick: datetime) -> list[str]:
    return [me for me in REPLICAS
            if tick_owner(probe_id, tick, me, [r for r in REPLICAS if r != me])]


def test_every_tick_has_exactly_one_owner_among_replicas_with_one_view() -> None:
    counts: Counter[str] = Counter()
    for probe_id in range(1, 11):
        for minute in range(60):
            found = owners(probe_id, START + timedelta(minutes=minute))
            assert len(found) == 1
            counts[found[0]] += 1
    assert set(counts) == set(REPLICAS)
    assert min(counts.values()) >= 600 / 3 * 0.8


def test_a_replica_alone_owns_every_tick() -> None:
    assert all(tick_owner(7, START + timedelta(seconds=s), "solo", []) for s in range(100))
