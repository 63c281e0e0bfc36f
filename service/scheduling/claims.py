"""Spreading claims over replicas: every replica fires a tick at the same instant, and waits a
little before claiming it, so that the tick usually goes to a replica chosen evenly (its rank
in a hash of the tick and the live replicas' ids, "rendezvous hashing") and, among those, to
the less loaded: a replica with more runs in flight than the least-loaded other one waits
longer. A replica alone never waits. The waits are bounded whatever the number of peers
(MAX_CLAIM_DELAY_S: the first MAX_RANK_PLACES places are spaced, every later one waits as
the last of them), so a slow or vanished preferred replica, or any number of replicas,
costs a tick at most a few tens of milliseconds. Agents are not peers here: they claim over
the API when their own tick fires and never wait, so the executor passes only the service's
replicas as `others`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime

RANK_STEP_S = 0.02
"""Wait per place behind the preferred replica, in seconds."""
MAX_RANK_PLACES = 3
"""Places that are spaced apart; a replica further back waits as this one does (the
preferred few still decide almost every tick, and the wait stays bounded)."""
LOAD_STEP_S = 0.005
"""Wait per run in flight above the least-loaded other replica, in seconds."""
MAX_LOAD_DELAY_S = 0.03
"""Most of the wait that load adds, in seconds."""
MAX_CLAIM_DELAY_S = RANK_STEP_S * MAX_RANK_PLACES + MAX_LOAD_DELAY_S
"""The longest any replica waits before claiming a tick, in seconds (0.09)."""


def _score(probe_id: int, tick: datetime, replica: str) -> bytes:
    return hashlib.blake2b(f"{probe_id}:{tick.timestamp():.6f}:{replica}".encode(),
                           digest_size=8).digest()


def claim_delay(probe_id: int, tick: datetime, me: str, in_flight: int,
                others: Mapping[str, int]) -> float:
    """Seconds this replica waits before claiming the tick: 0 when it is alone, never more
    than MAX_CLAIM_DELAY_S however many `others` (the other live replicas of its location,
    with their runs in flight) there are."""
    if not others:
        return 0.0
    mine = _score(probe_id, tick, me)
    place = sum(1 for r in others if r != me and _score(probe_id, tick, r) < mine)
    excess = in_flight - min(others.values())
    load = min(MAX_LOAD_DELAY_S, LOAD_STEP_S * excess) if excess > 0 else 0.0
    return min(place, MAX_RANK_PLACES) * RANK_STEP_S + load


def tick_owner(probe_id: int, tick: datetime, me: str, known: Iterable[str]) -> bool:
    """Whether this replica runs the tick while the database cannot decide: the first of it
    and the replicas last seen alive (`known`) in the tick's rendezvous order. Every replica
    with the same view picks the same one, so each tick runs once; replicas whose views
    differ (one joined or died during the outage) may both run it, and the claim decides
    when the database is back."""
    return min({me, *known}, key=lambda r: _score(probe_id, tick, r)) == me
