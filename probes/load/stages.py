"""The stages of a run as plain data: what each sends (no I/O). A profile lists its own
(`LoadProfile.planned_stages`); drivers and workers run them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sustain.probes.load.schedule import constant_offsets, gamma_offsets, measured_cap


@dataclass(frozen=True, slots=True)
class OpenStage:
    """Open loop: sends at intended offsets, never waiting for responses."""

    label: str
    rate: float
    duration_s: float
    warmup_s: float
    max_in_flight: int
    max_requests: int | None = None
    burstiness: float | None = None
    """None for a constant rate; else gamma-distributed gaps."""
    seed: int = 0
    arrivals: tuple[float, ...] | None = None
    """A trace's arrival offsets (already sped up); they replace the rate's."""

    def offsets(self) -> Iterator[float]:
        if self.arrivals is not None:
            return measured_cap(iter(self.arrivals), self.warmup_s, self.max_requests)
        end = self.warmup_s + self.duration_s
        if self.burstiness is None:
            arrivals = constant_offsets(self.rate, end)
        else:
            arrivals = gamma_offsets(self.rate, self.burstiness, self.seed, end)
        return measured_cap(arrivals, self.warmup_s, self.max_requests)


@dataclass(frozen=True, slots=True)
class ClosedStage:
    """Closed loop: `users` users, each sending when its previous response ended."""

    label: str
    users: int
    duration_s: float | None
    warmup_s: float
    max_requests: int | None = None
    think_time_s: float = 0.0
    min_requests: int | None = None
    """The stage runs on past duration_s until it has measured this many requests."""


@dataclass(frozen=True, slots=True)
class SingleStage:
    label: str = "single"


Stage = OpenStage | ClosedStage | SingleStage
