"""Probe bodies: endpoint x workload x load profile x schedule, with SLO thresholds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.load.profiles import LoadProfile, SingleProfile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.renamed import old_name
from sustain.probes.workload.spec import Workload
from sustain.service.schemas.common import (
    DbId,
    Documented,
    Labels,
    Locations,
    Name,
    patch_schema,
    reject_nulls,
)
from sustain.service.schemas.patterns import CRON_PATTERN
from sustain.service.schemas.rag_endpoints import pairing_problem
from sustain.service.schemas.renamed import accept_renamed
from sustain.service.ticks.locations import DEFAULT_LOCATION
from sustain.service.ticks.schedule import parse_cron

MAX_INTERVAL_S = 7 * 86_400


class RagEndpointIds(InputModel):
    """A RAG probe's other endpoints: the probe's own endpoint generates (a chat kind); these
    embed (the corpus once per run, then each question) and, optionally, rerank."""

    embed_endpoint_id: DbId = Field(description="An endpoint of api_kind openai-embeddings.")
    rerank_endpoint_id: DbId | None = Field(
        default=None, description="An endpoint of api_kind rerank, when the pipeline reranks "
        "what it retrieved.")


def check_rag_pairing(workload: Workload, rag_endpoints: RagEndpointIds | None) -> None:
    """A workload's `rag` and the probe's `rag_endpoints` come together or not at all."""
    problem = pairing_problem(workload.rag is not None, rag_endpoints is not None)
    if problem is not None:
        raise PydanticCustomError("rag_endpoints", problem, {"field": "rag_endpoints"})


ONE_SCHEDULE: JsonDict = {"oneOf": [
    {"required": ["interval_s"], "properties": {"interval_s": {"type": "integer"}}},
    {"required": ["cron"], "properties": {"cron": {"type": "string"}}}]}
"""A probe's body gives exactly one of interval_s and cron (a null one is not given)."""
RAG_PAIRING: JsonDict = {"anyOf": [
    {"properties": {"rag_endpoints": {"type": "null"},
                    "workload": {"properties": {"rag": {"type": "null"}}}}},
    {"required": ["rag_endpoints", "workload"],
     "properties": {"rag_endpoints": {"type": "object"},
                    "workload": {"required": ["rag"], "properties": {"rag": {"type": "object"}}}}}]}
"""workload.rag and rag_endpoints come together or not at all (check_rag_pairing)."""
JITTER_RULE = "; below the period between ticks (the interval, or a cron expression's " \
    "shortest gap)"


class ProbeCreate(InputModel):
    model_config = ConfigDict(json_schema_extra={"allOf": [ONE_SCHEDULE, RAG_PAIRING]})

    name: Name
    endpoint_id: DbId
    workload: Workload = Field(default_factory=Workload)
    rag_endpoints: RagEndpointIds | None = Field(
        default=None, description="A RAG probe's embeddings and rerank endpoints (with "
        "workload.rag); the probe's endpoint generates.")
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
                            "(pseudo-random per tick, the same on every replica)"
                            f"{JITTER_RULE}. Formerly `jitter_seconds` (still accepted, "
                            "deprecated).")
    enabled: bool = True
    locations: Locations = Field(
        default_factory=lambda: [DEFAULT_LOCATION],
        description="Where the probe runs from: each tick runs once in each location, by a "
        "replica (SUSTAIN_LOCATION) or an agent there. Default: the default location.")
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
        check_rag_pairing(self.workload, self.rag_endpoints)
        return self


def _cron(value: str) -> str:
    try:
        parse_cron(value)
    except ValueError as exc:
        raise ValueError(f"not a valid cron expression: {exc}") from None
    return " ".join(value.split())


Cron = Annotated[str, Field(max_length=200), AfterValidator(_cron),
                 Documented({"pattern": CRON_PATTERN})]
"""Its pattern: five fields of `*`, `*/step`, values and ascending ranges (an expression that
never fires, such as the 31st of February, is refused too)."""


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

    model_config = ConfigDict(json_schema_extra=patch_schema(
        frozenset({"rag_endpoints"}), {"not": {"required": ["interval_s", "cron"]}}))

    name: Name | None = None
    endpoint_id: DbId | None = None
    workload: Workload | None = None
    rag_endpoints: RagEndpointIds | None = Field(
        default=None, description="Replaced whole; null removes them (with a workload "
        "that has no rag).")
    profile: LoadProfile | None = None
    interval_s: int | None = Field(default=None, gt=0, le=MAX_INTERVAL_S,
                                   description="Switches a cron probe to an interval.")
    cron: Cron | None = None
    jitter_s: float | None = Field(default=None, ge=0, le=3600,
                                   description=f"Delay added to each tick{JITTER_RULE}.")
    enabled: bool | None = None
    locations: Locations | None = Field(default=None, description="Replaced whole.")
    slo: SloThresholds | None = None
    labels: Labels | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return accept_renamed(data)

    @model_validator(mode="after")
    def _nulls(self) -> ProbeUpdate:
        reject_nulls(self, frozenset({"rag_endpoints"}))
        if self.interval_s is not None and self.cron is not None:
            raise PydanticCustomError(
                "schedule", "give at most one of interval_s and cron", {"field": "interval_s"})
        return self


class ProbeRead(BaseModel):
    id: DbId
    name: str
    endpoint_id: DbId
    workload: Workload
    rag_endpoints: RagEndpointIds | None = None
    profile: LoadProfile
    interval_s: int
    cron: str | None
    jitter_s: float
    enabled: bool
    locations: list[str]
    slo: SloThresholds
    labels: dict[str, str]
    managed_by: str | None = Field(
        description="The config file that owns this probe (REST writes answer 409); null "
        "when it was created over REST.")
    created_at: datetime
    updated_at: datetime

    interval_seconds = old_name("interval_s", int)  # type: ignore[pydantic-field]
    jitter_seconds = old_name("jitter_s", float)  # type: ignore[pydantic-field]
