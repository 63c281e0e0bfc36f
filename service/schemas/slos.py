"""SLO bodies: which probes, which SLI, the objective, the compliance window, the tiers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.config import JsonDict

from sustain.probes.inputs import InputModel
from sustain.service.evaluation.tiers import DEFAULT_TIERS, BurnTier
from sustain.service.history.windows import parse_duration
from sustain.service.schemas.common import (
    MAX_DESCRIPTION_CHARS,
    Labels,
    Name,
    Text,
    patch_schema,
    reject_nulls,
)
from sustain.service.schemas.patterns import duration_pattern

SliKind = Literal["availability", "latency", "goodput", "quality"]
"""availability: successful / attempted requests; latency: successful requests at or under
a threshold / successful requests; goodput: requests that met every SLO threshold of their
probe / attempted; quality: quality canaries whose reply met their `expect` / checked."""
LatencyMetric = Literal["ttft", "tpot", "itl", "e2e", "ttfo"]
MAX_WINDOW_S = 90 * 86400


def _window(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_duration(value.strip())
        except ValueError:
            raise ValueError("a duration such as 28d, 7d or 1h") from None
    return value


Window = Annotated[int, Field(gt=0, le=MAX_WINDOW_S), BeforeValidator(_window),
                   WithJsonSchema({"anyOf": [
                       {"type": "integer", "exclusiveMinimum": 0, "maximum": MAX_WINDOW_S},
                       {"type": "string", "pattern": duration_pattern(MAX_WINDOW_S)}]})]
"""Seconds, or a duration such as 28d (at most 90 days)."""


LATENCY_FIELDS: JsonDict = {"anyOf": [
    {"required": ["kind", "metric", "threshold_ms"],
     "properties": {"kind": {"const": "latency"}, "metric": {"type": "string"},
                    "threshold_ms": {"type": "number"}}},
    {"properties": {"kind": {"enum": [k for k in get_args(SliKind) if k != "latency"]},
                    "metric": {"type": "null"}, "threshold_ms": {"type": "null"}}}]}
"""A latency SLI names its metric and threshold; the others name neither."""
SELECTS_PROBES: JsonDict = {"anyOf": [
    {"required": ["probes"], "properties": {"probes": {"minItems": 1}}},
    {"required": ["probe_labels"], "properties": {"probe_labels": {"minProperties": 1}}}]}
"""An SLO selects probes by name or by labels."""
SHORTER_RULE = "Each tier's short_window_s is below its long_window_s."
TIERS_RULE = f"Tier names are unique. {SHORTER_RULE}"


class Sli(InputModel):
    model_config = ConfigDict(json_schema_extra=LATENCY_FIELDS)

    kind: SliKind
    metric: LatencyMetric | None = Field(
        default=None, description="latency: which latency (itl: a request's worst gap).")
    threshold_ms: float | None = Field(
        default=None, gt=0, le=3_600_000,
        description="latency: a request is good when its metric is at or under this.")

    @model_validator(mode="after")
    def _latency_fields(self) -> Sli:
        if self.kind == "latency":
            if self.metric is None:
                raise ValueError("metric is required for a latency SLI")
            if self.threshold_ms is None:
                raise ValueError("threshold_ms is required for a latency SLI")
        elif self.metric is not None or self.threshold_ms is not None:
            raise ValueError("metric and threshold_ms belong to latency SLIs only")
        return self


class SloLocations(InputModel):
    """How the SLO is judged over the locations its probes run from."""

    mode: Literal["across", "each"] = Field(
        default="across", description="across: every location's events together; each: in "
        "each location on its own, a tier breaching when at least `min_locations` locations "
        "breach it.")
    min_locations: int = Field(
        default=1, ge=1, le=16, description="each: how many locations must breach a tier "
        "before it fires (so one location's network trouble does not page).")


class SloCreate(InputModel):
    model_config = ConfigDict(json_schema_extra=SELECTS_PROBES)

    name: Name
    description: Text | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    probes: list[Name] = Field(default_factory=list, max_length=1000,
                               description="Probe names covered.")
    probe_labels: Labels = Field(default_factory=dict,
                                 description="Probes whose labels include all of these.")
    sli: Sli
    objective: float = Field(gt=0, lt=1, description="e.g. 0.995")
    window: Window = Field(default=28 * 86400, description="Compliance window, e.g. 28d.")
    tiers: list[BurnTier] = Field(default_factory=lambda: list(DEFAULT_TIERS), max_length=16,
                                  description=TIERS_RULE)
    locations: SloLocations = Field(default_factory=SloLocations)

    @model_validator(mode="after")
    def _selects_something(self) -> SloCreate:
        if not self.probes and not self.probe_labels:
            raise ValueError("select probes by `probes` (names) or `probe_labels`")
        if len({t.name for t in self.tiers}) != len(self.tiers):
            raise ValueError("tier names must be unique")
        return self


class SloUpdate(InputModel):
    """PATCH body: only the fields given change (sli and tiers are replaced whole)."""

    model_config = ConfigDict(json_schema_extra=patch_schema())

    name: Name | None = None
    description: Text | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    probes: list[Name] | None = Field(default=None, max_length=1000)
    probe_labels: Labels | None = None
    sli: Sli | None = None
    objective: float | None = Field(default=None, gt=0, lt=1)
    window: Window | None = None
    tiers: list[BurnTier] | None = Field(default=None, max_length=16, description=SHORTER_RULE)
    locations: SloLocations | None = None

    @model_validator(mode="after")
    def _nulls(self) -> SloUpdate:
        reject_nulls(self)
        return self


class SloRead(BaseModel):
    id: int
    name: str
    description: str | None
    probes: list[str]
    probe_labels: dict[str, str]
    sli: Sli
    objective: float
    window_s: int
    tiers: list[BurnTier]
    locations: SloLocations = Field(default_factory=SloLocations)
    managed_by: str | None
    created_at: datetime
    updated_at: datetime


class WindowRead(BaseModel):
    window_s: int
    good: int
    total: int
    burn_rate: float | None = Field(description="null for a window without events.")


class LocationStatusRead(BaseModel):
    good: int
    total: int
    compliance: float | None
    budget_remaining: float | None
    breached_tiers: list[str]


class SloStatusRead(BaseModel):
    slo_id: int
    at: datetime
    objective: float
    window_s: int
    good: int
    total: int
    compliance: float | None
    budget_remaining: float | None = Field(
        description="Share of the compliance window's error budget left; negative when "
        "overspent; null without events.")
    windows: list[WindowRead]
    breached_tiers: list[str] = Field(
        description="As the SLO is judged: across locations, or in at least min_locations "
        "of them (`locations.mode` each).")
    approximate: bool = Field(description="Some counts come from sketches (old runs).")
    locations: dict[str, LocationStatusRead] = Field(
        default_factory=dict, description="The SLO in each location with events in its "
        "longest window, on its own.")

