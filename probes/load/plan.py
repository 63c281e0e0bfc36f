"""From a profile to its stages: what each stage sends, as plain data (no I/O)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sustain.probes.load.pareto_levels import pareto_levels
from sustain.probes.load.profiles import (
    CapacityProfile,
    ConcurrencyProfile,
    ConstantProfile,
    LoadProfile,
    ParetoProfile,
    PoissonProfile,
    SingleProfile,
    StepsProfile,
    SweepProfile,
    TraceProfile,
)
from sustain.probes.load.schedule import constant_offsets, gamma_offsets, measured_cap
from sustain.probes.load.search import next_level
from sustain.probes.measure.capacity import verdict
from sustain.probes.measure.summary import RunSummary
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
    min_requests: int | None = None
    """The stage runs on past duration_s until it has measured this many requests."""


@dataclass(frozen=True, slots=True)
class SingleStage:
    label: str = "single"


Stage = OpenStage | ClosedStage | SingleStage


def peak_in_flight(profile: LoadProfile) -> int:
    """The most requests `profile` may have in flight at once over all its workers: its
    closed-loop users, else the open loop's max_in_flight (as the service's limits count them);
    what the requests' own copies of a run's media are weighed by."""
    if isinstance(profile, SingleProfile):
        return 1
    if isinstance(profile, ConcurrencyProfile):
        return profile.users
    if isinstance(profile, SweepProfile):
        return max(profile.levels)
    if isinstance(profile, ParetoProfile):
        return profile.max_concurrency
    if isinstance(profile, CapacityProfile) and profile.unit == "concurrency":
        return profile.maximum
    if isinstance(profile, StepsProfile):
        return max(step.concurrency if step.concurrency is not None else profile.max_in_flight
                   for step in profile.stages)
    return profile.max_in_flight


def sessions_problem(profile: LoadProfile) -> str | None:
    """Why a sessions workload cannot run under `profile`, or None: conversations are
    played by closed-loop users (a single profile plays one conversation)."""
    if isinstance(profile, ConcurrencyProfile | SweepProfile | SingleProfile | ParetoProfile):
        return None
    if isinstance(profile, CapacityProfile) and profile.unit == "concurrency":
        return None
    if isinstance(profile, StepsProfile) and all(s.concurrency is not None
                                                 for s in profile.stages):
        return None
    return ("sessions run under a concurrency, sweep, pareto, capacity by concurrency, single "
            "or all-concurrency steps profile: its users are the conversations in flight")


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
    if isinstance(profile, ParetoProfile):
        return [ClosedStage(f"concurrency {level}", level, profile.duration_s, warmup,
                            profile.max_requests)
                for level in pareto_levels(profile.max_concurrency, profile.points)]
    if isinstance(profile, CapacityProfile):
        raise ValueError("a capacity search chooses its stages as it goes (StagePlan)")
    if isinstance(profile, TraceProfile):
        if replay is None:
            raise ValueError("a trace profile needs its trace loaded")
        arrivals = tuple(r.offset_s / profile.speedup for r in replay.requests)
        span = arrivals[-1] if arrivals else 0.0
        rate = len(arrivals) / span if span > 0 else float(len(arrivals))
        return [OpenStage(f"trace {len(arrivals)} requests x{profile.speedup:g}", rate,
                          span, warmup, cap, profile.max_requests, arrivals=arrivals)]
    raise TypeError(f"unknown profile {profile!r}")


def capacity_stage(profile: CapacityProfile, level: int) -> Stage:
    """One level of a capacity search: `level` users, or an open loop of `level` requests per
    second (long enough for min_samples)."""
    if profile.unit == "rate":
        duration = profile.duration_s if profile.min_samples is None else \
            max(profile.duration_s, profile.min_samples / level)
        return OpenStage(f"capacity {level}/s", float(level), duration, profile.warmup_s,
                         profile.max_in_flight)
    users = "user" if level == 1 else "users"
    return ClosedStage(f"capacity {level} {users}", level, profile.duration_s, profile.warmup_s,
                       min_requests=profile.min_samples)


def sweep_stop_reason(profile: SweepProfile, summary: RunSummary) -> str | None:
    """Why a sweep must not escalate past a stage with this summary, if it must not."""
    floor, ceiling = profile.min_availability, profile.max_ttft_p99_ms
    if floor is not None and (summary.availability or 0.0) < floor:
        return f"availability {summary.availability} below {floor}"
    p99 = summary.ttft_ms.p99
    if ceiling is not None and p99 is not None and p99 > ceiling:
        return f"TTFT p99 {p99:.1f} ms above {ceiling} ms"
    return None


@dataclass(slots=True)
class StagePlan:
    """The stages of a run, one at a time, each decided from the summaries of those before:
    a fixed profile lists its stages; a sweep stops after a level that breaks its stop
    condition (`stopped` says why); a capacity search picks each level from the verdicts so
    far, until capacity is known to the integer."""

    profile: LoadProfile
    replay: Replay | None = None
    stopped: str | None = None
    levels: list[int] = field(default_factory=list)
    """The load level of each stage planned (users, or requests per second)."""
    _fixed: list[Stage] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.profile, CapacityProfile):
            self._fixed = stages(self.profile, self.replay)

    def next(self, done: Sequence[RunSummary]) -> Stage | None:
        """The stage after the `done` ones (their summaries, in order), or None."""
        profile = self.profile
        if isinstance(profile, SweepProfile) and done:
            self.stopped = sweep_stop_reason(profile, done[-1])
            if self.stopped is not None:
                return None
        if self._fixed is not None:
            if len(done) >= len(self._fixed):
                return None
            stage = self._fixed[len(done)]
            self.levels.append(stage.users if isinstance(stage, ClosedStage) else 0)
            return stage
        assert isinstance(profile, CapacityProfile)
        verdicts = {level: verdict(summary, profile.slo).passed
                    for level, summary in zip(self.levels, done, strict=False)}
        level = next_level(verdicts, profile.minimum, profile.maximum)
        if level is None:
            return None
        self.levels.append(level)
        return capacity_stage(profile, level)
