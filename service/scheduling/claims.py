"""Spreading claims over replicas by load: every replica fires a tick at the same instant, and
one that has more runs in flight than the least-loaded live replica waits a little before
claiming, so the less loaded one usually takes the tick."""

from __future__ import annotations

from collections.abc import Collection

STEP_S = 0.005
"""Wait per run in flight above the least-loaded other replica."""
MAX_DELAY_S = 0.03
"""Never more: the delay adds to the run's start, and scheduling precision matters."""


def claim_delay(in_flight: int, others: Collection[int]) -> float:
    """Seconds to wait before claiming; 0 when no other replica is live or none is less
    loaded than this one."""
    if not others:
        return 0.0
    excess = in_flight - min(others)
    return min(MAX_DELAY_S, STEP_S * excess) if excess > 0 else 0.0
