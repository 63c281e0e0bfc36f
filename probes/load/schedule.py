"""Pure schedule generators: intended send offsets, in seconds from the run origin."""

from __future__ import annotations

from collections.abc import Iterator

from probes.load.profiles import ConstantProfile, LoadProfile, SingleProfile


def constant_offsets(rate: float, duration_s: float, max_requests: int | None) -> Iterator[float]:
    """k / rate for every k whose offset falls inside the duration, up to max_requests."""
    k = 0
    while (max_requests is None or k < max_requests) and (offset := k / rate) < duration_s:
        yield offset
        k += 1


def arrival_offsets(profile: LoadProfile) -> Iterator[float]:
    if isinstance(profile, SingleProfile):
        yield 0.0
    elif isinstance(profile, ConstantProfile):
        yield from constant_offsets(profile.rate, profile.duration_s, profile.max_requests)
