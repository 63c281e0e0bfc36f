"""Pure schedule generators: intended send offsets in seconds from a stage's origin."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator


def constant_offsets(rate: float, end_s: float) -> Iterator[float]:
    """k / rate for every k whose offset falls before end_s."""
    k = 0
    while (offset := k / rate) < end_s:
        yield offset
        k += 1


def gamma_offsets(rate: float, burstiness: float, seed: int, end_s: float) -> Iterator[float]:
    """Arrivals whose gaps are Gamma(shape=burstiness, scale=1/(rate*burstiness)): mean gap
    1/rate, coefficient of variation 1/sqrt(burstiness); burstiness 1 is a Poisson process.
    The first request goes at 0. Seeded, so a profile always yields the same schedule."""
    rng = random.Random(seed)
    scale = 1.0 / (rate * burstiness)
    offset = 0.0
    while offset < end_s:
        yield offset
        offset += rng.gammavariate(burstiness, scale)


def measured_cap(offsets: Iterable[float], warmup_s: float,
                 max_requests: int | None) -> Iterator[float]:
    """Pass offsets through until `max_requests` of them fall after the warmup."""
    measured = 0
    for offset in offsets:
        if max_requests is not None and measured >= max_requests:
            return
        if offset >= warmup_s:
            measured += 1
        yield offset
