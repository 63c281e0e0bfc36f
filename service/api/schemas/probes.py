"""Probe bodies: endpoint x workload x load profile x schedule, with SLO thresholds."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from probes.load.profiles import LoadProfile, SingleProfile
from probes.measure.slo import SloThresholds
from probes.workload.spec import Workload
from service.api.schemas.common import DbId, Labels, Name, reject_nulls

MAX_INTERVAL_S = 7 * 86_400


class ProbeCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    endpoint_id: DbId
    workload: Workload = Field(default_factory=Workload)
    profile: LoadProfile = Field(default_factory=SingleProfile)
    interval_seconds: int = Field(gt=0, le=MAX_INTERVAL_S, description="Seconds between runs.")
    jitter_seconds: float = Field(default=0.0, ge=0, le=3600,
                                  description="Random delay added to each tick, < interval.")
    enabled: bool = True
    slo: SloThresholds = Field(default_factory=SloThresholds)
    labels: Labels = Field(default_factory=dict)

    @model_validator(mode="after")
    def _jitter_below_interval(self) -> ProbeCreate:
        if self.jitter_seconds >= self.interval_seconds:
            raise PydanticCustomError(
                "jitter_too_large", "must be smaller than interval_seconds",
                {"field": "jitter_seconds"},
            )
        return self


class ProbeUpdate(BaseModel):
    """PATCH body: only the fields given change (workload, profile and slo are replaced whole)."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    endpoint_id: DbId | None = None
    workload: Workload | None = None
    profile: LoadProfile | None = None
    interval_seconds: int | None = Field(default=None, gt=0, le=MAX_INTERVAL_S)
    jitter_seconds: float | None = Field(default=None, ge=0, le=3600)
    enabled: bool | None = None
    slo: SloThresholds | None = None
    labels: Labels | None = None

    @model_validator(mode="after")
    def _nulls(self) -> ProbeUpdate:
        reject_nulls(self)
        return self


class ProbeRead(BaseModel):
    id: DbId
    name: str
    endpoint_id: DbId
    workload: Workload
    profile: LoadProfile
    interval_seconds: int
    jitter_seconds: float
    enabled: bool
    slo: SloThresholds
    labels: dict[str, str]
    created_at: datetime
    updated_at: datetime
