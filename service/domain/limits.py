"""What a load profile asks for, and whether that stays within the operator's limits
(SUSTAIN_MAX_RATE, SUSTAIN_MAX_CONCURRENCY, SUSTAIN_MAX_RUN_SECONDS, SUSTAIN_MAX_RUN_REQUESTS),
and whether all enabled probes together, and the number of stored objects, stay within theirs
(SUSTAIN_MAX_TOTAL_RATE; SUSTAIN_MAX_ENDPOINTS, _PROBES, _SLOS, _NOTIFIERS, _SILENCES).

Pure functions over plain data: `planned_load(profile)` says what a run of the profile plans
to do, each figure with the profile field that sets it; `limit_violations(load, limits)` lists
the (field, message) problems. The REST API answers them as a 422, the config file as problems
with their lines, `sustain probe` as flag errors; the executor refuses a stored profile that a
lowered limit no longer allows. What cannot be planned (how many requests closed-loop users
send, how long a closed loop capped only by max_requests takes) is bounded while the run goes
by a RunBudget of the same limits (sustain.probes.runner).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

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
from sustain.probes.runner import RunBudget

Path = tuple[str | int, ...]
"""Where a value sits in a profile, e.g. ("stages", 2, "rate")."""

BUDGET_GRACE_S = 120.0
"""A run may go on this long past SUSTAIN_MAX_RUN_SECONDS before its budget stops it: the
plan leaves out the responses still arriving when the last stage ends."""


@dataclass(frozen=True, slots=True)
class LoadLimits:
    max_rate: float
    """Requests/s any open-loop stage may ask for."""
    max_concurrency: int
    """Users of any closed-loop stage, and requests in flight of any open-loop one."""
    max_run_seconds: float
    """Planned length of a run: every stage with its warmup, in seconds."""
    max_run_requests: int
    """Requests a run may plan to send, warmups included."""
    max_workers: int | None = None
    """Measurement worker processes one run may use (the service's pool); None: unchecked."""
    max_total_rate: float | None = None
    """Requests/s all enabled probes together may plan (see `total_rate`); None: unchecked."""
    objects: ObjectLimits | None = None
    """How many endpoints, probes, SLOs, notifiers and silences may be stored; None:
    unchecked."""

    def budget(self) -> RunBudget:
        """The bounds a run is held to while it goes: its length, its request count, and the
        pace of its closed loops (at most max_rate requests/s, whatever the users)."""
        return RunBudget(seconds=self.max_run_seconds + BUDGET_GRACE_S,
                         requests=self.max_run_requests, max_rate=self.max_rate)


ObjectKind = Literal["endpoint", "probe", "slo", "notifier", "silence"]


@dataclass(frozen=True, slots=True)
class ObjectLimits:
    """The most objects of each kind the database may hold. Every list answer is paged, but
    each object still costs memory in every replica's scheduler and status page."""

    endpoints: int
    probes: int
    slos: int
    notifiers: int
    silences: int
    """Silences not yet expired (pending or active): every delivery pass loads the active
    ones and matches each alert it sends against them all. Expired ones are a record, read
    only a page at a time."""

    def of(self, kind: ObjectKind) -> int:
        return {"endpoint": self.endpoints, "probe": self.probes, "slo": self.slos,
                "notifier": self.notifiers, "silence": self.silences}[kind]


OBJECT_SETTINGS: dict[ObjectKind, str] = {
    "endpoint": "SUSTAIN_MAX_ENDPOINTS", "probe": "SUSTAIN_MAX_PROBES",
    "slo": "SUSTAIN_MAX_SLOS", "notifier": "SUSTAIN_MAX_NOTIFIERS",
    "silence": "SUSTAIN_MAX_SILENCES"}


def too_many(kind: ObjectKind, count: int, limit: int) -> str | None:
    """Why `count` objects of `kind` are too many (None when they are not), naming the
    setting: "at most 1,000 endpoints (SUSTAIN_MAX_ENDPOINTS)"."""
    if count <= limit:
        return None
    return f"at most {_n(limit)} {kind}s ({OBJECT_SETTINGS[kind]})"


def peak_rate(profile: LoadProfile, max_rate: float) -> float:
    """The most requests/s a run of `profile` may send, as the total-rate limit counts it:
    its fastest open-loop stage, or `max_rate` (the pace closed loops are held to, see
    RunBudget) when it has a closed-loop stage or a rate no plan can tell (a trace); a
    single request counts as 1 request/s."""
    if isinstance(profile, SingleProfile):
        return 1.0
    planned = _planned(profile).peak_rate
    open_rate = 0.0 if planned is None else planned.value
    closed = planned is None or (isinstance(profile, StepsProfile) and any(
        stage.concurrency is not None for stage in profile.stages))
    return max(open_rate, max_rate) if closed else open_rate


def total_rate(profiles: Iterable[LoadProfile], max_rate: float) -> float:
    """The requests/s all of `profiles` (the enabled probes') may send at once: the sum of
    their peak rates."""
    return math.fsum(peak_rate(p, max_rate) for p in profiles)


def total_rate_problem(total: float, max_total_rate: float) -> str | None:
    """Why `total` requests/s over all enabled probes is too much (None when it is not)."""
    if total <= max_total_rate:
        return None
    return (f"enabled probes would plan {_n(total)} requests/s in all; at most "
            f"{_n(max_total_rate)} (SUSTAIN_MAX_TOTAL_RATE; a closed loop counts at "
            "SUSTAIN_MAX_RATE)")


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


def _open_requests(rate: float, warmup_s: float, duration_s: float,
                   cap: int | None) -> int:
    """Requests of an open-loop stage: a warmup's worth, then the measured ones (at most
    `cap`)."""
    measured = math.ceil(rate * duration_s)
    return math.ceil(rate * warmup_s) + (measured if cap is None else min(cap, measured))


def planned_load(profile: LoadProfile) -> PlannedLoad:
    """What a run of `profile` plans to do."""
    return replace(_planned(profile), workers=profile.workers)


def _planned(profile: LoadProfile) -> PlannedLoad:
    warmup = profile.warmup_s
    if isinstance(profile, SingleProfile):
        one = Demand(1, ("kind",), "one request")
        return PlannedLoad(None, one, Demand(0.0, ("kind",), "one request"), one)
    if isinstance(profile, ConstantProfile | PoissonProfile):
        rate, duration, cap = profile.rate, profile.duration_s, profile.max_requests
        capped = cap is not None and cap < math.ceil(rate * duration)
        return PlannedLoad(
            peak_rate=Demand(rate, ("rate",), "rate"),
            peak_concurrency=Demand(profile.max_in_flight, ("max_in_flight",),
                                    "max_in_flight (requests in flight)"),
            seconds=Demand(warmup + duration, ("duration_s",), "warmup_s + duration_s"),
            requests=Demand(_open_requests(rate, warmup, duration, cap),
                            ("max_requests",) if capped else ("duration_s",),
                            "rate x warmup_s + max_requests" if capped
                            else "rate x (warmup_s + duration_s)"))
    if isinstance(profile, ConcurrencyProfile):
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=Demand(profile.users, ("users",), "users"),
            seconds=None if profile.duration_s is None else Demand(
                warmup + profile.duration_s, ("duration_s",), "warmup_s + duration_s"),
            requests=None if profile.max_requests is None else Demand(
                profile.max_requests, ("max_requests",), "max_requests"))
    if isinstance(profile, StepsProfile):
        return _steps(profile)
    if isinstance(profile, SweepProfile):
        levels = len(profile.levels)
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=Demand(max(profile.levels), ("levels",), "the highest level"),
            seconds=Demand(levels * (warmup + profile.duration_s), ("duration_s",),
                           f"{levels} levels x (warmup_s + duration_s)"),
            requests=None if profile.max_requests is None else Demand(
                levels * profile.max_requests, ("max_requests",),
                f"{levels} levels x max_requests"))
    if isinstance(profile, ParetoProfile):
        count = len(pareto_levels(profile.max_concurrency, profile.points))
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=Demand(profile.max_concurrency, ("max_concurrency",),
                                    "max_concurrency"),
            seconds=Demand(count * (warmup + profile.duration_s), ("duration_s",),
                           f"{count} points x (warmup_s + duration_s)"),
            requests=None if profile.max_requests is None else Demand(
                count * profile.max_requests, ("max_requests",),
                f"{count} points x max_requests"))
    if isinstance(profile, CapacityProfile):
        levels = search_levels(profile.minimum, profile.maximum)
        by_rate = profile.unit == "rate"
        top = Demand(profile.maximum, ("maximum",), "maximum")
        return PlannedLoad(
            peak_rate=top if by_rate else None,
            peak_concurrency=Demand(profile.max_in_flight, ("max_in_flight",),
                                    "max_in_flight (requests in flight)") if by_rate else top,
            seconds=Demand(levels * (warmup + profile.duration_s), ("duration_s",),
                           f"at most {levels} levels x (warmup_s + duration_s)"),
            requests=None)
    if isinstance(profile, TraceProfile):  # its file is read when the run starts
        return PlannedLoad(
            peak_rate=None,
            peak_concurrency=Demand(profile.max_in_flight, ("max_in_flight",),
                                    "max_in_flight (requests in flight)"),
            seconds=None,
            requests=None if profile.max_requests is None else Demand(
                profile.max_requests, ("max_requests",), "max_requests"))
    raise TypeError(f"unknown profile {profile!r}")


def search_levels(minimum: int, maximum: int) -> int:
    """The most levels a capacity search from `minimum` to `maximum` measures: the doublings
    up to the maximum, then a bisection of the last doubling's span."""
    doublings = 1
    level = minimum
    while level < maximum:
        level = min(2 * level, maximum)
        doublings += 1
    return doublings + max(0, math.ceil(math.log2(max(1, maximum - maximum // 2))))


def _steps(profile: StepsProfile) -> PlannedLoad:
    warmup = profile.warmup_s
    rates = [Demand(s.rate, ("stages", i, "rate"), "rate")
             for i, s in enumerate(profile.stages) if s.rate is not None]
    busy = [Demand(s.concurrency, ("stages", i, "concurrency"), "concurrency")
            if s.concurrency is not None else
            Demand(profile.max_in_flight, ("max_in_flight",),
                   "max_in_flight (requests in flight)")
            for i, s in enumerate(profile.stages)]
    stages = len(profile.stages)
    requests = sum(_open_requests(s.rate, warmup, s.duration_s, None)
                   for s in profile.stages if s.rate is not None)
    return PlannedLoad(
        peak_rate=max(rates, key=lambda d: d.value, default=None),
        peak_concurrency=max(busy, key=lambda d: d.value),
        seconds=Demand(sum(warmup + s.duration_s for s in profile.stages), ("stages",),
                       f"{stages} stages x warmup_s + their duration_s"),
        requests=Demand(requests, ("stages",), "rate x (warmup_s + duration_s) of the "
                        "rate stages") if rates else None)


def _n(value: float) -> str:
    """A figure for a message: 86,400 or 0.5."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.6g}"


def limit_violations(load: PlannedLoad, limits: LoadLimits) -> list[tuple[Path, str]]:
    """Each figure of `load` beyond `limits`: (field, message), in the order rate, users,
    seconds, requests, workers."""
    found: list[tuple[Path, str]] = []
    if load.peak_rate is not None and load.peak_rate.value > limits.max_rate:
        found.append((load.peak_rate.field,
                      f"{_n(load.peak_rate.value)} requests/s; at most {_n(limits.max_rate)} "
                      "(SUSTAIN_MAX_RATE)"))
    busy = load.peak_concurrency
    if busy.value > limits.max_concurrency:
        found.append((busy.field, f"{busy.how} is {_n(busy.value)}; at most "
                                  f"{_n(limits.max_concurrency)} (SUSTAIN_MAX_CONCURRENCY)"))
    if load.seconds is not None and load.seconds.value > limits.max_run_seconds:
        found.append((load.seconds.field,
                      f"{load.seconds.how} = {_n(load.seconds.value)} s; at most "
                      f"{_n(limits.max_run_seconds)} s per run (SUSTAIN_MAX_RUN_SECONDS)"))
    if load.requests is not None and load.requests.value > limits.max_run_requests:
        found.append((load.requests.field,
                      f"{load.requests.how} = {_n(load.requests.value)} requests; at most "
                      f"{_n(limits.max_run_requests)} per run (SUSTAIN_MAX_RUN_REQUESTS)"))
    if limits.max_workers is not None and load.workers > limits.max_workers:
        found.append((("workers",), f"{load.workers} worker processes; at most "
                                    f"{limits.max_workers} (SUSTAIN_MEASURE_WORKERS)"))
    return found


class BeyondLimitsError(ValueError):
    """A stored profile that the limits no longer allow (they were lowered after it was
    written): its runs fail with this message, naming each field."""


def check_limits(profile: LoadProfile, limits: LoadLimits) -> None:
    """BeyondLimitsError naming every field of `profile` beyond `limits`."""
    found = limit_violations(planned_load(profile), limits)
    if found:
        raise BeyondLimitsError("the profile is beyond this service's limits: " + "; ".join(
            f"{dotted('profile', path)}: {message}" for path, message in found))


def dotted(prefix: str, path: Path) -> str:
    """`("stages", 2, "rate")` under `profile` -> `profile.stages.2.rate` (as REST names
    fields)."""
    return ".".join([prefix, *(str(p) for p in path)])
