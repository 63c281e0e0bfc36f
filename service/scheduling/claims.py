"""Spreading claims over replicas: every replica fires a tick at the same instant, and waits a
little before claiming it, so that the tick usually goes to a replica chosen evenly (its rank
in a hash of the tick and the live replicas' ids, "rendezvous hashing") and, among those, to
the less loaded: a replica with more runs in flight than the least-loaded other one waits
longer. A replica alone never waits. The waits are bounded, so a slow or vanished preferred
replica costs a tick at most a few tens of milliseconds."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime

RANK_STEP_S = 0.02
"""Wait per place behind the preferred replica."""
LOAD_STEP_S = 0.005
"""Wait per run in flight above the least-loaded other replica."""
MAX_LOAD_DELAY_S = 0.03


def _score(probe_id: int, tick: datetime, replica: str) -> bytes:
    return hashlib.blake2b(f"{probe_id}:{tick.timestamp():.6f}:{replica}".encode(),
                           digest_size=8).digest()


def claim_delay(probe_id: int, tick: datetime, me: str, in_flight: int,
                others: Mapping[str, int]) -> float:
    """Seconds this replica waits before claiming the tick; 0 when it is alone."""
    if not others:
        return 0.0
    order = sorted([me, *others], key=lambda r: _score(probe_id, tick, r))
    excess = in_flight - min(others.values())
    load = min(MAX_LOAD_DELAY_S, LOAD_STEP_S * excess) if excess > 0 else 0.0
    return order.index(me) * RANK_STEP_S + load


def tick_owner(probe_id: int, tick: datetime, me: str, known: Iterable[str]) -> bool:
    """Whether this replica runs the tick while the database cannot decide: the first of it
    and the replicas last seen alive (`known`) in the tick's rendezvous order. Every replica
    with the same view picks the same one, so each tick runs once; replicas whose views
    differ (one joined or died during the outage) may both run it, and the claim decides
    when the database is back."""
    return min({me, *known}, key=lambda r: _score(probe_id, tick, r)) == me
