"""Probes side by side (GET /api/v1/compare, `sustain compare`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from sustain.probes.renamed import SUMMARY_RENAMED, accept_renamed, old_name
from sustain.service.evaluation.stability import Stability


class Percentiles(BaseModel):
    p50: float | None
    p99: float | None


class CapacityFigures(BaseModel):
    unit: str | None
    latest: int | None
    """The newest capacity run's highest passing level (0: none passed)."""
    latest_system_tps: float | None
    runs: int
    minimum: int | None
    median: float | None
    maximum: int | None
    """Over the window's capacity runs."""


class DriftVerdict(BaseModel):
    metric: str
    stat: str
    verdict: str
    ratio: float | None


class ProbeFigures(BaseModel):
    probe: str
    probe_id: int
    location: str | None = None
    """The location whose runs these figures are; null: every location's together."""
    endpoint: str
    model: str
    runs: int
    availability: float | None
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    requests_per_second: float | None
    output_tokens_per_second: float | None
    goodput: float | None
    items_per_second: float | None = None
    """Inputs embedded or documents ranked per second (item kinds)."""
    rtf_ratio: Percentiles | None = None
    """Real-time factor of transcriptions (processing time / audio time)."""
    retrieval_hit_ratio: float | None = None
    """RAG questions whose expected passage was retrieved, over those that named one."""
    ttfo_ms: Percentiles | None = None
    """Time to the first answer output (after a reasoning model's thinking); null for kinds
    without an answer stream."""
    reasoning_share: float | None = None
    """Mean share of output tokens spent reasoning (0 for a model that answers at once)."""
    dns_ms: Percentiles | None = None
    """HTTP phases (docs/metrics.md#http-phases): name resolution, TCP connect and TLS
    handshake of the requests that opened a connection, and TTFB; each null when no request
    had it. Side by side by location, connect is the network's round trip from each, and
    TTFB less connect the server's time to its answer's head."""
    connect_ms: Percentiles | None = None
    tls_ms: Percentiles | None = None
    ttfb_ms: Percentiles | None = None
    capacity: CapacityFigures | None
    """For probes that search capacity; None otherwise."""
    efficiency: dict[str, Any] | None
    """The newest run's efficiency under its endpoint's deployment."""
    stability: dict[str, Stability]
    drift: list[DriftVerdict]
    pareto: list[dict[str, Any]] | None
    """The newest Pareto run's points (level, system_tps, tps_per_user, on_front, ...)."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """Figures answered by a server of the release before (the CLI reads these)."""
        return accept_renamed(data, SUMMARY_RENAMED)

    request_throughput = old_name("requests_per_second", float | None)  # type: ignore[pydantic-field]
    output_token_throughput = old_name("output_tokens_per_second", float | None)  # type: ignore[pydantic-field]
    item_throughput = old_name("items_per_second", float | None)  # type: ignore[pydantic-field]
    rtf = old_name("rtf_ratio", Percentiles | None)  # type: ignore[pydantic-field]
    retrieval_hit_rate = old_name("retrieval_hit_ratio", float | None)  # type: ignore[pydantic-field]


class Comparison(BaseModel):
    from_: datetime = Field(serialization_alias="from")
    to: datetime
    probes: list[ProbeFigures]
