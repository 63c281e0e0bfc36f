"""Who claims a tick first, and who runs it while the database cannot decide: both by
rendezvous hashing of the tick over the replicas of its location, so every replica with the
same view of who is alive picks the same one and ticks spread evenly over the replicas.

Ticks are claimed ahead of their firing, in batches (scheduling/ahead.py): a tick's preferred
replica claims it first, every other replica of the location only a moment later, when it
sweeps up whatever is left (its preferred replica is dead, slow or busier). No replica ever
waits at the tick itself: the order is decided before it. A replica busier than the
least-loaded other one by more than LOAD_MARGIN runs leaves its preferred ticks to the sweep.
Agents are not peers here: they claim over the API when their own tick fires, so the
executor passes only the service's replicas as `others`. This module does no I/O (agents
use `tick_owner` too)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime

LOAD_MARGIN = 4
"""Runs in flight above the least-loaded other replica of the location past which a replica
leaves its preferred ticks to the others' sweep (a replica is never pushed back further)."""


def _score(probe_id: int, tick: datetime, replica: str) -> bytes:
    return hashlib.blake2b(f"{probe_id}:{tick.timestamp():.6f}:{replica}".encode(),
                           digest_size=8).digest()


def preferred(probe_id: int, tick: datetime, me: str, others: Mapping[str, int],
              in_flight: int = 0) -> bool:
    """Whether this replica claims the tick first: it comes first among itself and the
    other live replicas of its location (`others`, with their runs in flight) in the tick's
    rendezvous order, and is not busier than the least-loaded of them by more than
    LOAD_MARGIN. A replica alone always is."""
    if not others:
        return True
    if in_flight - min(others.values()) > LOAD_MARGIN:
        return False
    mine = _score(probe_id, tick, me)
    return all(_score(probe_id, tick, r) > mine for r in others if r != me)


def tick_owner(probe_id: int, tick: datetime, me: str, known: Iterable[str]) -> bool:
    """Whether this replica runs the tick while the database cannot decide: the first of it
    and the replicas last seen alive (`known`) in the tick's rendezvous order. Every replica
    with the same view picks the same one, so each tick runs once; replicas whose views
    differ (one joined or died during the outage) may both run it, and the claim decides
    when the database is back."""
    return min({me, *known}, key=lambda r: _score(probe_id, tick, r)) == me
