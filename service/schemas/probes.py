"""Probe bodies: endpoint x workload x load profile x schedule, with SLO thresholds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, computed_field, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.load.profiles import LoadProfile, SingleProfile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.workload.spec import Workload
from sustain.service.domain.renamed import accept_renamed
from sustain.service.domain.schedule import parse_cron
from sustain.service.schemas.common import DbId, Labels, Name, reject_nulls

MAX_INTERVAL_S = 7 * 86_400


class ProbeCreate(InputModel):
    name: Name
    endpoint_id: DbId
    workload: Workload = Field(default_factory=Workload)
    profile: LoadProfile = Field(default_factory=SingleProfile)
    interval_s: int | None = Field(
        default=None, gt=0, le=MAX_INTERVAL_S,
        description="Seconds between runs (ticks on multiples since the Unix epoch); "
        "give this or `cron`. Formerly `interval_seconds` (still accepted, deprecated).")
    cron: Cron | None = Field(
        default=None, description="Five-field crontab expression in UTC, e.g. `*/5 * * * *`; "
        "give this or `interval_s`.")
    jitter_s: float = Field(default=0.0, ge=0, le=3600,
                            description="Delay added to each tick, below the period "
                            "(pseudo-random per tick, the same on every replica). Formerly "
                            "`jitter_seconds` (still accepted, deprecated).")
    enabled: bool = True
    slo: SloThresholds = Field(default_factory=SloThresholds)
    labels: Labels = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return accept_renamed(data)

    @model_validator(mode="after")
    def _one_schedule(self) -> ProbeCreate:
        if (self.interval_s is None) == (self.cron is None):
            raise PydanticCustomError(
                "schedule", "give exactly one of interval_s and cron", {"field": "interval_s"})
        check_jitter(self.jitter_s, self.interval_s, self.cron)
        return self


def _cron(value: str) -> str:
    try:
        parse_cron(value)
    except ValueError as exc:
        raise ValueError(f"not a valid cron expression: {exc}") from None
    return " ".join(value.split())


Cron = Annotated[str, Field(max_length=200), AfterValidator(_cron)]


def period_of(interval_s: int | None, cron: str | None) -> int:
    """The probe's interval: its own, or the shortest gap between a cron schedule's ticks
    (over its first 20 after a fixed reference time)."""
    if cron is not None:
        return max(1, int(parse_cron(cron).shortest_gap_s()))
    assert interval_s is not None
    return interval_s


def check_jitter(jitter_s: float, interval_s: int | None, cron: str | None) -> None:
    if jitter_s >= period_of(interval_s, cron):
        raise PydanticCustomError(
            "jitter_too_large", "must be smaller than the interval between ticks",
            {"field": "jitter_s"})


class ProbeUpdate(InputModel):
    """PATCH body: only the fields given change (workload, profile and slo are replaced whole)."""

    name: Name | None = None
    endpoint_id: DbId | None = None
    workload: Workload | None = None
    profile: LoadProfile | None = None
    interval_s: int | None = Field(default=None, gt=0, le=MAX_INTERVAL_S,
                                   description="Switches a cron probe to an interval.")
    cron: Cron | None = None
    jitter_s: float | None = Field(default=None, ge=0, le=3600)
    enabled: bool | None = None
    slo: SloThresholds | None = None
    labels: Labels | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return accept_renamed(data)

    @model_validator(mode="after")
    def _nulls(self) -> ProbeUpdate:
        reject_nulls(self)
        if self.interval_s is not None and self.cron is not None:
            raise PydanticCustomError(
                "schedule", "give at most one of interval_s and cron", {"field": "interval_s"})
        return self


class ProbeRead(BaseModel):
    id: DbId
    name: str
    endpoint_id: DbId
    workload: Workload
    profile: LoadProfile
    interval_s: int
    cron: str | None
    jitter_s: float
    enabled: bool
    slo: SloThresholds
    labels: dict[str, str]
    managed_by: str | None = Field(
        description="The config file that owns this probe (REST writes answer 409); null "
        "when it was created over REST.")
    created_at: datetime
    updated_at: datetime

    @computed_field(json_schema_extra={"deprecated": True})  # type: ignore[prop-decorator]
    @property
    def interval_seconds(self) -> int:
        """Deprecated name of interval_s, answered until the next release."""
        return self.interval_s

    @computed_field(json_schema_extra={"deprecated": True})  # type: ignore[prop-decorator]
    @property
    def jitter_seconds(self) -> float:
        """Deprecated name of jitter_s, answered until the next release."""
        return self.jitter_s
