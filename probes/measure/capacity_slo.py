"""What a load level of a capacity search must meet (an input, checked at parse time): a
percentile of each named latency within its threshold, and a success ratio."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel

PERCENTILE_FIELDS: dict[float, str] = {50: "p50", 90: "p90", 95: "p95", 99: "p99", 99.9: "p999"}
"""The Distribution field of each percentile a capacity SLO may name."""


class CapacitySlo(InputModel):
    """What a load level must meet to pass: the chosen percentile of each named latency
    within its threshold (ms), and a success ratio of at least `min_success`."""

    ttft_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    tpot_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    ttfo_ms: float | None = Field(default=None, gt=0, le=3_600_000,
                                  description="Time to the first answer output.")
    e2e_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    percentile: float = Field(default=99, description="50, 90, 95, 99 or 99.9.")
    min_success: float = Field(default=0.99, ge=0, le=1)

    @field_validator("percentile")
    @classmethod
    def _reported(cls, value: float) -> float:
        if value not in PERCENTILE_FIELDS:
            raise PydanticCustomError("percentile", "one of 50, 90, 95, 99 and 99.9")
        return value

    @model_validator(mode="after")
    def _a_threshold(self) -> CapacitySlo:
        if self.ttft_ms is None and self.tpot_ms is None and self.ttfo_ms is None \
                and self.e2e_ms is None:
            raise PydanticCustomError(
                "slo", "set at least one of ttft_ms, tpot_ms, ttfo_ms and e2e_ms",
                {"field": "ttft_ms"})
        return self
