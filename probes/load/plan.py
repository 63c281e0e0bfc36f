"""From a profile to its stages: what each stage sends, as plain data (no I/O)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sustain.probes.load.profiles import (
    ConcurrencyProfile,
    ConstantProfile,
    LoadProfile,
    PoissonProfile,
    SingleProfile,
    StepsProfile,
    SweepProfile,
    TraceProfile,
)
from sustain.probes.load.schedule import constant_offsets, gamma_offsets, measured_cap
from sustain.probes.workload.traces import Replay


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


@dataclass(frozen=True, slots=True)
class SingleStage:
    label: str = "single"


Stage = OpenStage | ClosedStage | SingleStage


def sessions_problem(profile: LoadProfile) -> str | None:
    """Why a sessions workload cannot run under `profile`, or None: conversations are
    played by closed-loop users (a single profile plays one conversation)."""
    if isinstance(profile, ConcurrencyProfile | SweepProfile | SingleProfile):
        return None
    if isinstance(profile, StepsProfile) and all(s.concurrency is not None
                                                 for s in profile.stages):
        return None
    return ("sessions run under a concurrency, sweep, single or all-concurrency steps "
            "profile: its users are the conversations in flight")


def stages(profile: LoadProfile, replay: Replay | None = None) -> list[Stage]:
    """The stages of a profile, in the order they run (a trace profile's need its loaded
    `replay`)."""
    warmup, cap = profile.warmup_s, profile.max_in_flight
    if isinstance(profile, SingleProfile):
        return [SingleStage()]
    if isinstance(profile, ConstantProfile):
        return [OpenStage(f"rate {profile.rate:g}/s", profile.rate, profile.duration_s, warmup,
                          cap, profile.max_requests)]
    if isinstance(profile, PoissonProfile):
        return [OpenStage(f"poisson {profile.rate:g}/s", profile.rate, profile.duration_s,
                          warmup, cap, profile.max_requests, profile.burstiness, profile.seed)]
    if isinstance(profile, ConcurrencyProfile):
        return [ClosedStage(f"concurrency {profile.users}", profile.users, profile.duration_s,
                            warmup, profile.max_requests, profile.think_time_s)]
    if isinstance(profile, StepsProfile):
        planned: list[Stage] = []
        for step in profile.stages:
            if step.rate is not None:
                planned.append(OpenStage(f"rate {step.rate:g}/s", step.rate, step.duration_s,
                                         warmup, cap))
            else:
                assert step.concurrency is not None
                planned.append(ClosedStage(f"concurrency {step.concurrency}", step.concurrency,
                                           step.duration_s, warmup))
        return planned
    if isinstance(profile, SweepProfile):
        return [ClosedStage(f"concurrency {level}", level, profile.duration_s, warmup,
                            profile.max_requests, profile.think_time_s)
                for level in profile.levels]
    if isinstance(profile, TraceProfile):
        if replay is None:
            raise ValueError("a trace profile needs its trace loaded")
        arrivals = tuple(r.offset_s / profile.speedup for r in replay.requests)
        span = arrivals[-1] if arrivals else 0.0
        rate = len(arrivals) / span if span > 0 else float(len(arrivals))
        return [OpenStage(f"trace {len(arrivals)} requests x{profile.speedup:g}", rate,
                          span, warmup, cap, profile.max_requests, arrivals=arrivals)]
    raise TypeError(f"unknown profile {profile!r}")
