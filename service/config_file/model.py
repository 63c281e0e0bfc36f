"""The config file's shape: endpoints (the REST endpoint body), named workloads, and probes
that refer to them by name, with a schedule of `every:` or `cron:` plus `jitter:`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.load.profiles import LoadProfile, SingleProfile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.workload.spec import Workload
from sustain.service.alerting.notifiers import NotifierCreate
from sustain.service.history.windows import parse_duration
from sustain.service.schemas.common import Labels, Locations, Name
from sustain.service.schemas.endpoints import EndpointCreate
from sustain.service.schemas.probes import MAX_INTERVAL_S, Cron, check_jitter
from sustain.service.schemas.slos import SloCreate
from sustain.service.ticks.locations import DEFAULT_LOCATION


def _seconds(value: object) -> object:
    """`30s`, `5m`, `1h`, `1d` or a number of seconds."""
    if isinstance(value, str):
        try:
            return parse_duration(value.strip())
        except ValueError:
            raise ValueError("a duration such as 30s, 5m, 1h or 1d, or a number of "
                             "seconds") from None
    return value


Seconds = Annotated[float, BeforeValidator(_seconds), Field(ge=0)]


class ScheduleSpec(InputModel):
    every: Annotated[int, BeforeValidator(_seconds), Field(gt=0, le=MAX_INTERVAL_S)] | None = None
    cron: Cron | None = None
    jitter: Seconds = 0.0

    @model_validator(mode="after")
    def _one(self) -> ScheduleSpec:
        if (self.every is None) == (self.cron is None):
            raise PydanticCustomError("schedule", "give exactly one of every and cron", {})
        try:
            check_jitter(self.jitter, self.every, self.cron)
        except PydanticCustomError:
            raise PydanticCustomError(
                "jitter_too_large", "jitter must be smaller than the interval between ticks",
                {}) from None
        return self


class WorkloadSpec(Workload):
    name: Name


class RagEndpointNames(InputModel):
    """A RAG probe's other endpoints, by name (the REST body's `rag_endpoints` ids)."""

    embed: Name = Field(description="An openai-embeddings endpoint declared in this file.")
    rerank: Name | None = Field(
        default=None, description="A rerank endpoint declared in this file.")


class ProbeSpec(InputModel):
    name: Name
    endpoint: Name = Field(description="Name of an endpoint declared in this file.")
    workload: Name | Workload = Field(
        default_factory=Workload,
        description="Name of a workload declared in this file, or a workload inline.")
    rag_endpoints: RagEndpointNames | None = Field(
        default=None, description="A RAG probe's embeddings and rerank endpoints (with a "
        "workload that has `rag`); its own endpoint generates.")
    profile: LoadProfile = Field(default_factory=SingleProfile)
    schedule: ScheduleSpec
    enabled: bool = True
    locations: Locations = Field(
        default_factory=lambda: [DEFAULT_LOCATION],
        description="Where the probe runs from: each tick once in each location "
        "(SUSTAIN_LOCATION of the replicas, or an agent's --location).")
    slo: SloThresholds = Field(default_factory=SloThresholds)
    labels: Labels = Field(default_factory=dict)


class ConfigFile(InputModel):
    version: Literal[1] = 1
    endpoints: list[EndpointCreate] = Field(default_factory=list)
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    probes: list[ProbeSpec] = Field(default_factory=list)
    slos: list[SloCreate] = Field(default_factory=list)
    notifiers: list[NotifierCreate] = Field(default_factory=list)
