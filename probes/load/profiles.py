"""Load profiles: how requests are issued during a run (docs/metrics.md#open-and-closed-loop,
#warmup).

Open-loop profiles (`constant`, `poisson`, rate stages) send at intended times whatever the
endpoint does; closed-loop profiles (`concurrency`, concurrency stages, `sweep`) keep N users
each waiting for its response. Every profile can warm up first: requests started during the
warmup of a stage are sent but left out of its results.

Each profile knows its own run: its stages (`planned_stages`), what it plans to send
(`planned_load`: peak rate, peak concurrency, seconds, requests, each with the field that sets
it), its peak in-flight requests and its peak rate. A new kind of profile is one class here.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import replace
from typing import Annotated, Literal, assert_never, get_args

from pydantic import Field, TypeAdapter, model_validator
from pydantic_core import PydanticCustomError
from typing_extensions import override

from sustain.probes.inputs import InputModel
from sustain.probes.load.demand import (
    Demand,
    PlannedLoad,
    in_flight,
    open_requests,
    search_levels,
)
from sustain.probes.load.pareto_levels import pareto_levels
from sustain.probes.load.stages import ClosedStage, OpenStage, SingleStage, Stage
from sustain.probes.measure.capacity_slo import CapacitySlo
from sustain.probes.workload.traces import Replay

MAX_DURATION_S = 86_400.0
MAX_RATE = 1_000_000.0
"""The profile's own bound on a rate, as high as SUSTAIN_MAX_RATE may be set: the operator's
limit (SUSTAIN_MAX_RATE, default 1,000 requests/s), checked wherever a profile is accepted, is
the one that applies."""
MAX_USERS = 10_000
MAX_REQUESTS = 10_000_000
MAX_WORKERS = 64


class _Profile(InputModel):
    warmup_s: float = Field(
        default=0.0, ge=0, le=3600,
        description="Seconds at the start of each stage whose requests are not counted.",
    )
    max_in_flight: int = Field(
        default=256, ge=1, le=100_000,
        description="Open loop: cap on requests in flight; a request that must wait for a slot "
        "shows up as lag and in corrected latency.",
    )
    workers: int = Field(
        default=1, ge=1, le=MAX_WORKERS,
        description="Measurement worker processes the run is spread over (each sends its "
        "share of the arrivals or users); at most the service's SUSTAIN_MEASURE_WORKERS, and "
        "at most max_in_flight.",
    )

    @model_validator(mode="after")
    def _slots_per_worker(self) -> _Profile:
        if self.workers > self.max_in_flight:
            raise PydanticCustomError(
                "workers", "workers must be at most max_in_flight (each needs a slot)",
                {"field": "workers"})
        return self

    @abstractmethod
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        """The stages of a run, in the order they run. Only a trace profile's need its loaded
        `replay` (ValueError without it); a capacity search chooses its stages as it goes
        (ValueError: see StagePlan and `CapacityProfile.level_stage`)."""

    @abstractmethod
    def _planned(self) -> PlannedLoad:
        """What a run plans to send, before its workers are counted."""

    def planned_load(self) -> PlannedLoad:
        """What a run of this profile plans to do: the figures the operator's limits
        (SUSTAIN_MAX_RATE, _CONCURRENCY, _RUN_SECONDS, _RUN_REQUESTS, _MEASURE_WORKERS) are
        held against, each with the field that sets it."""
        return replace(self._planned(), workers=self.workers)

    def peak_in_flight(self) -> int:
        """The most requests a run may have in flight at once over all its workers: its
        closed-loop users, else the open loop's max_in_flight (as the service's limits count
        them); what the requests' own copies of a run's media are weighed by."""
        return int(self._planned().peak_concurrency.value)

    def peak_rate(self, max_rate: float) -> float:
        """The most requests/s a run may send, as the total-rate limit counts it: its fastest
        open-loop stage, or `max_rate` (the pace closed loops are held to, see RunBudget)
        when it has a closed-loop stage or a rate no plan can tell (a trace)."""
        planned = self._planned().peak_rate
        return max_rate if planned is None else planned.value

    def plays_sessions(self) -> bool:
        """Whether a sessions workload can run under it: conversations are played by
        closed-loop users (a single profile plays one conversation)."""
        return False


class SingleProfile(_Profile):
    """One request: a cheap heartbeat."""

    kind: Literal["single"] = "single"

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        return [SingleStage()]

    @override
    def _planned(self) -> PlannedLoad:
        one = Demand(1, ("kind",), "one request")
        return PlannedLoad(None, one, Demand(0.0, ("kind",), "one request"), one)

    @override
    def peak_rate(self, max_rate: float) -> float:
        """A single request counts as 1 request/s."""
        return 1.0

    @override
    def plays_sessions(self) -> bool:
        return True


class ConstantProfile(_Profile):
    """Open loop at a fixed rate: request k is intended at k / rate seconds."""

    kind: Literal["constant"] = "constant"
    rate: float = Field(gt=0, le=MAX_RATE, description="Requests per second.")
    duration_s: float = Field(gt=0, le=MAX_DURATION_S, description="Seconds of measured sending.")
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        return [OpenStage(f"rate {self.rate:g}/s", self.rate, self.duration_s, self.warmup_s,
                          self.max_in_flight, self.max_requests)]

    @override
    def _planned(self) -> PlannedLoad:
        return _open_loop(self)


class PoissonProfile(_Profile):
    """Open loop with gamma-distributed gaps: mean 1/rate, coefficient of variation
    1/sqrt(burstiness). burstiness 1.0 is a Poisson process; below 1 is burstier."""

    kind: Literal["poisson"] = "poisson"
    rate: float = Field(gt=0, le=MAX_RATE, description="Mean requests per second.")
    burstiness: float = Field(default=1.0, gt=0, le=1000)
    duration_s: float = Field(gt=0, le=MAX_DURATION_S)
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        return [OpenStage(f"poisson {self.rate:g}/s", self.rate, self.duration_s,
                          self.warmup_s, self.max_in_flight, self.max_requests,
                          self.burstiness, self.seed)]

    @override
    def _planned(self) -> PlannedLoad:
        return _open_loop(self)


def _open_loop(profile: ConstantProfile | PoissonProfile) -> PlannedLoad:
    """The plan of one open-loop stage at `rate` for warmup_s + duration_s."""
    rate, warmup, duration, cap = (profile.rate, profile.warmup_s, profile.duration_s,
                                   profile.max_requests)
    capped = cap is not None and cap < math.ceil(rate * duration)
    return PlannedLoad(
        peak_rate=Demand(rate, ("rate",), "rate"),
        peak_concurrency=in_flight(profile.max_in_flight),
        seconds=Demand(warmup + duration, ("duration_s",), "warmup_s + duration_s"),
        requests=Demand(open_requests(rate, warmup, duration, cap),
                        ("max_requests",) if capped else ("duration_s",),
                        "rate x warmup_s + max_requests" if capped
                        else "rate x (warmup_s + duration_s)"))


class ConcurrencyProfile(_Profile):
    """Closed loop: `users` virtual users, each sending its next request when its previous
    response ends (plus an optional think time)."""

    kind: Literal["concurrency"] = "concurrency"
    users: int = Field(ge=1, le=MAX_USERS)
    think_time_s: float = Field(default=0.0, ge=0, le=3600)
    duration_s: float | None = Field(default=None, gt=0, le=MAX_DURATION_S)
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)

    @model_validator(mode="after")
    def _bounded(self) -> ConcurrencyProfile:
        if self.duration_s is None and self.max_requests is None:
            raise PydanticCustomError("unbounded", "set duration_s or max_requests",
                                      {"field": "duration_s"})
        return self

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        return [ClosedStage(f"concurrency {self.users}", self.users, self.duration_s,
                            self.warmup_s, self.max_requests, self.think_time_s)]

    @override
    def _planned(self) -> PlannedLoad:
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=Demand(self.users, ("users",), "users"),
            seconds=None if self.duration_s is None else Demand(
                self.warmup_s + self.duration_s, ("duration_s",), "warmup_s + duration_s"),
            requests=None if self.max_requests is None else Demand(
                self.max_requests, ("max_requests",), "max_requests"))

    @override
    def plays_sessions(self) -> bool:
        return True


class Step(InputModel):
    """One stage of a `steps` profile: an open-loop rate or a closed-loop concurrency."""

    rate: float | None = Field(default=None, gt=0, le=MAX_RATE)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_USERS)
    duration_s: float = Field(gt=0, le=MAX_DURATION_S)

    @model_validator(mode="after")
    def _one_of(self) -> Step:
        if (self.rate is None) == (self.concurrency is None):
            raise PydanticCustomError("step_kind", "set exactly one of rate and concurrency",
                                      {"field": "rate"})
        return self


class StepsProfile(_Profile):
    """A list of stages run one after the other, each measured on its own."""

    kind: Literal["steps"] = "steps"
    stages: list[Step] = Field(min_length=1, max_length=100)

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        planned: list[Stage] = []
        for step in self.stages:
            if step.rate is not None:
                planned.append(OpenStage(f"rate {step.rate:g}/s", step.rate, step.duration_s,
                                         self.warmup_s, self.max_in_flight))
            else:
                assert step.concurrency is not None
                planned.append(ClosedStage(f"concurrency {step.concurrency}", step.concurrency,
                                           step.duration_s, self.warmup_s))
        return planned

    @override
    def _planned(self) -> PlannedLoad:
        warmup = self.warmup_s
        rates = [Demand(s.rate, ("stages", i, "rate"), "rate")
                 for i, s in enumerate(self.stages) if s.rate is not None]
        busy = [Demand(s.concurrency, ("stages", i, "concurrency"), "concurrency")
                if s.concurrency is not None else in_flight(self.max_in_flight)
                for i, s in enumerate(self.stages)]
        requests = sum(open_requests(s.rate, warmup, s.duration_s, None)
                       for s in self.stages if s.rate is not None)
        return PlannedLoad(
            peak_rate=max(rates, key=lambda d: d.value, default=None),
            peak_concurrency=max(busy, key=lambda d: d.value),
            seconds=Demand(sum(warmup + s.duration_s for s in self.stages), ("stages",),
                           f"{len(self.stages)} stages x warmup_s + their duration_s"),
            requests=Demand(requests, ("stages",), "rate x (warmup_s + duration_s) of the "
                            "rate stages") if rates else None)

    @override
    def peak_rate(self, max_rate: float) -> float:
        """Its fastest rate stage; at least `max_rate` with a concurrency stage."""
        planned = self._planned().peak_rate
        open_rate = 0.0 if planned is None else planned.value
        closed = any(step.concurrency is not None for step in self.stages)
        return max(open_rate, max_rate) if closed else open_rate

    @override
    def plays_sessions(self) -> bool:
        return all(step.concurrency is not None for step in self.stages)


class SweepProfile(_Profile):
    """Concurrency levels run in ascending order, each its own stage: the throughput versus
    interactivity curve. Escalation stops after the first stage that breaks a stop condition,
    since the level where the endpoint saturates is itself the result."""

    kind: Literal["sweep"] = "sweep"
    levels: list[int] = Field(min_length=1, max_length=50)
    duration_s: float = Field(gt=0, le=MAX_DURATION_S, description="Seconds per level.")
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS,
                                     description="Requests per level.")
    think_time_s: float = Field(default=0.0, ge=0, le=3600)
    min_availability: float | None = Field(default=0.9, ge=0, le=1,
                                           description="Stop after a level below this.")
    max_ttft_p99_ms: float | None = Field(default=None, gt=0,
                                          description="Stop after a level above this.")

    @model_validator(mode="after")
    def _ascending(self) -> SweepProfile:
        if any(level < 1 or level > MAX_USERS for level in self.levels):
            raise PydanticCustomError("levels", f"levels must be between 1 and {MAX_USERS}",
                                      {"field": "levels"})
        if self.levels != sorted(set(self.levels)):
            raise PydanticCustomError("levels", "levels must be strictly ascending",
                                      {"field": "levels"})
        return self

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        return [ClosedStage(f"concurrency {level}", level, self.duration_s, self.warmup_s,
                            self.max_requests, self.think_time_s)
                for level in self.levels]

    @override
    def _planned(self) -> PlannedLoad:
        levels = len(self.levels)
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=Demand(max(self.levels), ("levels",), "the highest level"),
            seconds=Demand(levels * (self.warmup_s + self.duration_s), ("duration_s",),
                           f"{levels} levels x (warmup_s + duration_s)"),
            requests=None if self.max_requests is None else Demand(
                levels * self.max_requests, ("max_requests",),
                f"{levels} levels x max_requests"))

    @override
    def plays_sessions(self) -> bool:
        return True


class TraceProfile(_Profile):
    """Open loop at a trace's own arrival times (Mooncake JSONL or Azure CSV), each request
    with the trace's prompt and output lengths; the run ends after the trace's last request."""

    kind: Literal["trace"] = "trace"
    path: str = Field(min_length=1, max_length=4096,
                      description="The trace file (under SUSTAIN_DATASET_DIR in the service).")
    format: Literal["mooncake", "azure"] = "mooncake"
    speedup: float = Field(default=1.0, gt=0, le=1000,
                           description="Replay this many times faster than recorded.")
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        if replay is None:
            raise ValueError("a trace profile needs its trace loaded")
        arrivals = tuple(r.offset_s / self.speedup for r in replay.requests)
        span = arrivals[-1] if arrivals else 0.0
        rate = len(arrivals) / span if span > 0 else float(len(arrivals))
        return [OpenStage(f"trace {len(arrivals)} requests x{self.speedup:g}", rate,
                          span, self.warmup_s, self.max_in_flight, self.max_requests,
                          arrivals=arrivals)]

    @override
    def _planned(self) -> PlannedLoad:
        # Its file is read when the run starts: no rate or length can be planned here.
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=in_flight(self.max_in_flight),
            seconds=None,
            requests=None if self.max_requests is None else Demand(
                self.max_requests, ("max_requests",), "max_requests"))


class CapacityProfile(_Profile):
    """The highest load that meets an SLO: levels are measured by doubling from `minimum`
    until one fails (or `maximum` passes), then by bisection to the exact integer between
    the highest passing and the lowest failing level. `unit` concurrency measures closed-loop
    users, rate an open loop of that many requests per second."""

    kind: Literal["capacity"] = "capacity"
    slo: CapacitySlo
    unit: Literal["concurrency", "rate"] = "concurrency"
    minimum: int = Field(default=1, ge=1, le=MAX_USERS, description="The first level.")
    maximum: int = Field(ge=1, le=MAX_USERS, description="The highest level tried.")
    duration_s: float = Field(gt=0, le=MAX_DURATION_S, description="Seconds per level.")
    min_samples: int | None = Field(
        default=None, ge=1, le=MAX_REQUESTS,
        description="A level runs on past duration_s until it has this many requests (so its "
        "percentile can have a confidence bound: p99 needs 662).")

    @model_validator(mode="after")
    def _range(self) -> CapacityProfile:
        if self.minimum > self.maximum:
            raise PydanticCustomError("range", "minimum must not exceed maximum",
                                      {"field": "minimum"})
        if self.unit == "rate" and self.maximum > MAX_RATE:
            raise PydanticCustomError("range", f"a rate is at most {MAX_RATE:g}/s",
                                      {"field": "maximum"})
        return self

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        raise ValueError("a capacity search chooses its stages as it goes (StagePlan)")

    def level_stage(self, level: int) -> Stage:
        """One level of the search: `level` users, or an open loop of `level` requests per
        second (long enough for min_samples)."""
        match self.unit:
            case "rate":
                duration = self.duration_s if self.min_samples is None else \
                    max(self.duration_s, self.min_samples / level)
                return OpenStage(f"capacity {level}/s", float(level), duration, self.warmup_s,
                                 self.max_in_flight)
            case "concurrency":
                users = "user" if level == 1 else "users"
                return ClosedStage(f"capacity {level} {users}", level, self.duration_s,
                                   self.warmup_s, min_requests=self.min_samples)
            case _:
                assert_never(self.unit)

    @override
    def _planned(self) -> PlannedLoad:
        levels = search_levels(self.minimum, self.maximum)
        top = Demand(self.maximum, ("maximum",), "maximum")
        seconds = Demand(levels * (self.warmup_s + self.duration_s), ("duration_s",),
                         f"at most {levels} levels x (warmup_s + duration_s)")
        match self.unit:
            case "rate":
                return PlannedLoad(peak_rate=top, peak_concurrency=in_flight(self.max_in_flight),
                                   seconds=seconds, requests=None)
            case "concurrency":
                return PlannedLoad(peak_rate=None, peak_concurrency=top, seconds=seconds,
                                   requests=None)
            case _:
                assert_never(self.unit)

    @override
    def plays_sessions(self) -> bool:
        return self.unit == "concurrency"


class ParetoProfile(_Profile):
    """MLPerf Endpoints' curve: `points` fixed concurrencies, chosen by its region rule (one
    in Ultra Low, 1-32; one in each of Low, Medium and High, which split the log2 range from
    32 to `max_concurrency` in thirds; the rest spread over those three), each measured for
    `duration_s`; per point system throughput against per-user interactivity."""

    kind: Literal["pareto"] = "pareto"
    max_concurrency: int = Field(ge=1, le=MAX_USERS)
    points: int = Field(default=7, ge=2, le=32)
    duration_s: float = Field(gt=0, le=MAX_DURATION_S, description="Seconds per point.")
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS,
                                     description="Requests per point.")

    @override
    def planned_stages(self, replay: Replay | None = None) -> list[Stage]:
        return [ClosedStage(f"concurrency {level}", level, self.duration_s, self.warmup_s,
                            self.max_requests)
                for level in pareto_levels(self.max_concurrency, self.points)]

    @override
    def _planned(self) -> PlannedLoad:
        count = len(pareto_levels(self.max_concurrency, self.points))
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=Demand(self.max_concurrency, ("max_concurrency",),
                                    "max_concurrency"),
            seconds=Demand(count * (self.warmup_s + self.duration_s), ("duration_s",),
                           f"{count} points x (warmup_s + duration_s)"),
            requests=None if self.max_requests is None else Demand(
                count * self.max_requests, ("max_requests",),
                f"{count} points x max_requests"))

    @override
    def plays_sessions(self) -> bool:
        return True


LoadProfile = Annotated[
    SingleProfile | ConstantProfile | PoissonProfile | ConcurrencyProfile | StepsProfile
    | SweepProfile | TraceProfile | CapacityProfile | ParetoProfile,
    Field(discriminator="kind"),
]

PROFILE_KINDS: frozenset[str] = frozenset(
    str(cls.model_fields["kind"].default) for cls in get_args(get_args(LoadProfile)[0]))
"""The `kind` tags of LoadProfile."""

PROFILE_ADAPTER = TypeAdapter[LoadProfile](LoadProfile)
"""Validates a profile as stored (JSON) or built from flags; the one adapter everyone uses."""


def parse_profile(raw: object) -> LoadProfile:
    """A LoadProfile from plain data; pydantic's ValidationError names the bad field."""
    return PROFILE_ADAPTER.validate_python(raw)
