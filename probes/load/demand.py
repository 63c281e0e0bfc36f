"""What a run of a load profile plans to do, as plain data: its peak rate, its peak
concurrency, its seconds and its requests, each figure with the profile field that sets it
(so a limit beyond it can name that field). Each profile computes its own
(`LoadProfile.planned_load`); the service holds the figures against its limits."""

from __future__ import annotations

import math
from dataclasses import dataclass

Path = tuple[str | int, ...]
"""Where a value sits in a profile, e.g. ("stages", 2, "rate")."""


@dataclass(frozen=True, slots=True)
class Demand:
    """One figure of a plan and the field that sets it."""

    value: float
    field: Path
    how: str
    """How it follows from the profile, for messages (e.g. `warmup_s + duration_s`)."""


@dataclass(frozen=True, slots=True)
class PlannedLoad:
    peak_rate: Demand | None
    """Requests/s of the fastest open-loop stage; None without one (closed loops go as fast
    as the endpoint answers)."""
    peak_concurrency: Demand
    """Users, or requests in flight, of the busiest stage."""
    seconds: Demand | None
    """Every stage with its warmup; None when a closed loop is bounded only by a request
    count."""
    requests: Demand | None
    """Requests planned (at least; closed-loop stages without a cap add what the endpoint
    allows); None when nothing can be planned."""
    workers: int = 1
    """Measurement worker processes the run is spread over."""


IN_FLIGHT_HOW = "max_in_flight (requests in flight)"


def in_flight(max_in_flight: int) -> Demand:
    """An open loop's concurrency: its cap on requests in flight."""
    return Demand(max_in_flight, ("max_in_flight",), IN_FLIGHT_HOW)


def open_requests(rate: float, warmup_s: float, duration_s: float, cap: int | None) -> int:
    """Requests of an open-loop stage: a warmup's worth, then the measured ones (at most
    `cap`)."""
    measured = math.ceil(rate * duration_s)
    return math.ceil(rate * warmup_s) + (measured if cap is None else min(cap, measured))


def search_levels(minimum: int, maximum: int) -> int:
    """The most levels a capacity search from `minimum` to `maximum` measures: the doublings
    up to the maximum, then a bisection of the last doubling's span."""
    doublings = 1
    level = minimum
    while level < maximum:
        level = min(2 * level, maximum)
        doublings += 1
    return doublings + max(0, math.ceil(math.log2(max(1, maximum - maximum // 2))))
