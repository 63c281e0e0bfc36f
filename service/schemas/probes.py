"""Probe bodies: endpoint x workload x load profile x schedule, with SLO thresholds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.load.profiles import LoadProfile, SingleProfile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.workload.spec import Workload
from sustain.service.domain.schedule import parse_cron
from sustain.service.schemas.common import DbId, Labels, Name, reject_nulls

MAX_INTERVAL_S = 7 * 86_400


class ProbeCreate(InputModel):
    name: Name
    endpoint_id: DbId
    workload: Workload = Field(default_factory=Workload)
    profile: LoadProfile = Field(default_factory=SingleProfile)
    interval_seconds: int | None = Field(
        default=None, gt=0, le=MAX_INTERVAL_S,
        description="Seconds between runs (ticks on multiples since the Unix epoch); "
        "give this or `cron`.")
    cron: Cron | None = Field(
        default=None, description="Five-field crontab expression in UTC, e.g. `*/5 * * * *`; "
        "give this or `interval_seconds`.")
    jitter_seconds: float = Field(default=0.0, ge=0, le=3600,
                                  description="Delay added to each tick, below the period "
                                  "(pseudo-random per tick, the same on every replica).")
    enabled: bool = True
    slo: SloThresholds = Field(default_factory=SloThresholds)
    labels: Labels = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_schedule(self) -> ProbeCreate:
        if (self.interval_seconds is None) == (self.cron is None):
            raise PydanticCustomError(
                "schedule", "give exactly one of interval_seconds and cron",
                {"field": "interval_seconds"})
        check_jitter(self.jitter_seconds, self.interval_seconds, self.cron)
        return self


def _cron(value: str) -> str:
    try:
        parse_cron(value)
    except ValueError as exc:
        raise ValueError(f"not a valid cron expression: {exc}") from None
    return " ".join(value.split())


Cron = Annotated[str, Field(max_length=200), AfterValidator(_cron)]


def period_of(interval_seconds: int | None, cron: str | None) -> int:
    """The probe's interval: its own, or the shortest gap between a cron schedule's ticks
    (over its first 20 after a fixed reference time)."""
    if cron is not None:
        return max(1, int(parse_cron(cron).shortest_gap_s()))
    assert interval_seconds is not None
    return interval_seconds


def check_jitter(jitter_seconds: float, interval_seconds: int | None, cron: str | None) -> None:
    if jitter_seconds >= period_of(interval_seconds, cron):
        raise PydanticCustomError(
            "jitter_too_large", "must be smaller than the interval between ticks",
            {"field": "jitter_seconds"})


class ProbeUpdate(InputModel):
    """PATCH body: only the fields given change (workload, profile and slo are replaced whole)."""

    name: Name | None = None
    endpoint_id: DbId | None = None
    workload: Workload | None = None
    profile: LoadProfile | None = None
    interval_seconds: int | None = Field(default=None, gt=0, le=MAX_INTERVAL_S,
                                         description="Switches a cron probe to an interval.")
    cron: Cron | None = None
    jitter_seconds: float | None = Field(default=None, ge=0, le=3600)
    enabled: bool | None = None
    slo: SloThresholds | None = None
    labels: Labels | None = None

    @model_validator(mode="after")
    def _nulls(self) -> ProbeUpdate:
        reject_nulls(self)
        if self.interval_seconds is not None and self.cron is not None:
            raise PydanticCustomError(
                "schedule", "give at most one of interval_seconds and cron",
                {"field": "interval_seconds"})
        return self


class ProbeRead(BaseModel):
    id: DbId
    name: str
    endpoint_id: DbId
    workload: Workload
    profile: LoadProfile
    interval_seconds: int
    cron: str | None
    jitter_seconds: float
    enabled: bool
    slo: SloThresholds
    labels: dict[str, str]
    managed_by: str | None = Field(
        description="The config file that owns this probe (REST writes answer 409); null "
        "when it was created over REST.")
    created_at: datetime
    updated_at: datetime
