"""Load profiles: how requests are issued during a run (docs/metrics.md#open-and-closed-loop,
#warmup).

Open-loop profiles (`constant`, `poisson`, rate stages) send at intended times whatever the
endpoint does; closed-loop profiles (`concurrency`, concurrency stages, `sweep`) keep N users
each waiting for its response. Every profile can warm up first: requests started during the
warmup of a stage are sent but left out of its results.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.measure.capacity_slo import CapacitySlo

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


class SingleProfile(_Profile):
    """One request: a cheap heartbeat."""

    kind: Literal["single"] = "single"


class ConstantProfile(_Profile):
    """Open loop at a fixed rate: request k is intended at k / rate seconds."""

    kind: Literal["constant"] = "constant"
    rate: float = Field(gt=0, le=MAX_RATE, description="Requests per second.")
    duration_s: float = Field(gt=0, le=MAX_DURATION_S, description="Seconds of measured sending.")
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)


class PoissonProfile(_Profile):
    """Open loop with gamma-distributed gaps: mean 1/rate, coefficient of variation
    1/sqrt(burstiness). burstiness 1.0 is a Poisson process; below 1 is burstier."""

    kind: Literal["poisson"] = "poisson"
    rate: float = Field(gt=0, le=MAX_RATE, description="Mean requests per second.")
    burstiness: float = Field(default=1.0, gt=0, le=1000)
    duration_s: float = Field(gt=0, le=MAX_DURATION_S)
    max_requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


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


LoadProfile = Annotated[
    SingleProfile | ConstantProfile | PoissonProfile | ConcurrencyProfile | StepsProfile
    | SweepProfile | TraceProfile | CapacityProfile | ParetoProfile,
    Field(discriminator="kind"),
]

PROFILE_KINDS = frozenset({"single", "constant", "poisson", "concurrency", "steps", "sweep",
                           "trace", "capacity", "pareto"})
"""The `kind` tags of LoadProfile."""

PROFILE_ADAPTER = TypeAdapter[LoadProfile](LoadProfile)
"""Validates a profile as stored (JSON) or built from flags; the one adapter everyone uses."""


def parse_profile(raw: object) -> LoadProfile:
    """A LoadProfile from plain data; pydantic's ValidationError names the bad field."""
    return PROFILE_ADAPTER.validate_python(raw)
