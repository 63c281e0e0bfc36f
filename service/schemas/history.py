"""Bodies of history queries: time series of a statistic, and a window's summary."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from sustain.probes.measure.deployment import Efficiency
from sustain.probes.measure.run_sketches import MetricName
from sustain.probes.renamed import SUMMARY_RENAMED, accept_renamed, old_name
from sustain.service.evaluation.stability import Stability
from sustain.service.history.aggregate import Stat
from sustain.service.schemas.common import DbId


class SeriesPoint(BaseModel):
    start: datetime
    end: datetime
    value: float | None
    """None when the window had runs but no values for this statistic (e.g. all failed)."""
    count: int
    """Values behind a latency statistic; attempts behind availability; successes behind the
    throughputs; good requests behind goodput."""
    runs: int
    low_count: bool
    """Too few values to trust the statistic (a percentile without a 99 % confidence bound)."""


class Series(BaseModel):
    probe_id: DbId
    location: str | None = None
    """The location whose runs these are; null: every location's together."""
    metric: MetricName
    stat: Stat
    unit: str
    step_s: int
    from_: datetime = Field(serialization_alias="from")
    to: datetime
    points: list[SeriesPoint]
    """One per step-aligned window that had runs; windows without runs are absent."""

    step_seconds = old_name("step_s", int)  # type: ignore[pydantic-field]


class MetricSummary(BaseModel):
    """A latency metric over the window, from merged sketches (1 % relative accuracy)."""

    count: int
    mean: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None
    low_count: list[str]
    """Percentiles with too few values for a 99 % confidence bound."""


class WindowSummary(BaseModel):
    probe_id: DbId
    location: str | None = None
    """The location whose runs these are; null: every location's together."""
    from_: datetime = Field(serialization_alias="from")
    to: datetime
    runs: int
    attempts: int
    successes: int
    availability: float | None
    measured_s: float
    """Summed measured time of the runs: the throughputs' denominator."""
    requests_per_second: float | None
    output_tokens: int
    output_tokens_per_second: float | None
    good: int
    goodput: float | None
    items: int | None = None
    """Inputs embedded or documents ranked by the successful requests (item kinds only)."""
    items_per_second: float | None = None
    """items / measured_s."""
    retrieval_checked: int | None = None
    """RAG questions that named their expected passage."""
    retrieval_hit_ratio: float | None = None
    """Their share whose passage was retrieved."""
    metrics: dict[str, MetricSummary]
    efficiency: Efficiency | None = None
    """Over the window, under the endpoint's deployment as declared now: tokens/s per
    accelerator and per kW, cost per million output and good tokens; null without one."""
    stability: dict[str, Stability] = Field(default_factory=dict)
    """Run-to-run coefficient of variation of ttft_p50, ttft_p99, tpot_p50, tpot_p99 and
    output_token_throughput, with a band: < 5 % excellent, 5-10 % good, 10-20 % fair,
    > 20 % unstable (null with fewer than 3 runs)."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """A summary answered by a server of the release before (the CLI reads these)."""
        return accept_renamed(data, SUMMARY_RENAMED)

    request_throughput = old_name("requests_per_second", float | None)  # type: ignore[pydantic-field]
    output_token_throughput = old_name("output_tokens_per_second", float | None)  # type: ignore[pydantic-field]
    item_throughput = old_name("items_per_second", float | None)  # type: ignore[pydantic-field]
    retrieval_hit_rate = old_name("retrieval_hit_ratio", float | None)  # type: ignore[pydantic-field]


class CapacityPoint(BaseModel):
    run_id: DbId
    scheduled_for: datetime
    capacity: int
    """The highest level (users or requests/s) that met the SLO; 0 when none did."""
    system_tps: float | None
    """Output tokens per second at that level."""
    location: str
    """Where the run measured from."""


class CapacitySeries(BaseModel):
    probe_id: DbId
    location: str | None = None
    """The location whose runs these are; null: every location's together."""
    points: list[CapacityPoint]
