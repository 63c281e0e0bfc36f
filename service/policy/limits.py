"""What a load profile asks for, and whether that stays within the operator's limits
(SUSTAIN_MAX_RATE, SUSTAIN_MAX_CONCURRENCY, SUSTAIN_MAX_RUN_S, SUSTAIN_MAX_RUN_REQUESTS),
and whether all enabled probes together, and the number of stored objects, stay within theirs
(SUSTAIN_MAX_TOTAL_RATE; SUSTAIN_MAX_ENDPOINTS, _PROBES, _SLOS, _NOTIFIERS, _SILENCES).

Pure functions over plain data: `profile.planned_load()` (sustain.probes.load.profiles) says
what a run of the profile plans to do, each figure with the profile field that sets it;
`limit_violations(load, limits)` lists the (field, message) problems, naming the settings.
The REST API answers them as a 422, the config file as problems with their lines, `sustain
probe` as flag errors; the executor refuses a stored profile that a lowered limit no longer
allows. What cannot be planned (how many requests closed-loop users send, how long a closed
loop capped only by max_requests takes) is bounded while the run goes by a RunBudget of the
same limits (sustain.probes.runner).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from sustain.probes.load.demand import Path as Path
from sustain.probes.load.demand import PlannedLoad
from sustain.probes.load.profiles import LoadProfile
from sustain.probes.runner import RunBudget

BUDGET_GRACE_S = 120.0
"""A run may go on this long past SUSTAIN_MAX_RUN_S before its budget stops it: the
plan leaves out the responses still arriving when the last stage ends."""


@dataclass(frozen=True, slots=True)
class LoadLimits:
    max_rate: float
    """Requests/s any open-loop stage may ask for."""
    max_concurrency: int
    """Users of any closed-loop stage, and requests in flight of any open-loop one."""
    max_run_s: float
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
        return RunBudget(seconds=self.max_run_s + BUDGET_GRACE_S,
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


def total_rate(profiles: Iterable[LoadProfile], max_rate: float) -> float:
    """The requests/s all of `profiles` (the enabled probes') may send at once: the sum of
    their peak rates (`LoadProfile.peak_rate`)."""
    return math.fsum(p.peak_rate(max_rate) for p in profiles)


def total_rate_problem(total: float, max_total_rate: float) -> str | None:
    """Why `total` requests/s over all enabled probes is too much (None when it is not)."""
    if total <= max_total_rate:
        return None
    return (f"enabled probes would plan {_n(total)} requests/s in all; at most "
            f"{_n(max_total_rate)} (SUSTAIN_MAX_TOTAL_RATE; a closed loop counts at "
            "SUSTAIN_MAX_RATE)")


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
    if load.seconds is not None and load.seconds.value > limits.max_run_s:
        found.append((load.seconds.field,
                      f"{load.seconds.how} = {_n(load.seconds.value)} s; at most "
                      f"{_n(limits.max_run_s)} s per run (SUSTAIN_MAX_RUN_S)"))
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
    found = limit_violations(profile.planned_load(), limits)
    if found:
        raise BeyondLimitsError("the profile is beyond this service's limits: " + "; ".join(
            f"{dotted('profile', path)}: {message}" for path, message in found))


def dotted(prefix: str, path: Path) -> str:
    """`("stages", 2, "rate")` under `profile` -> `profile.stages.2.rate` (as REST names
    fields)."""
    return ".".join([prefix, *(str(p) for p in path)])
