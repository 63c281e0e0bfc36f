"""Per-request SLO thresholds and whether a request met them (goodput)."""

from __future__ import annotations

from pydantic import Field

from sustain.probes.inputs import InputModel
from sustain.probes.measure.sample import Outcome, Sample


class SloThresholds(InputModel):
    """Per-request thresholds in ms; unset means not checked."""

    ttft_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    tpot_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    ttfo_ms: float | None = Field(
        default=None, gt=0, le=3_600_000, description="Time to the first answer output, "
        "after a reasoning model's thinking (TTFT counts the thinking's first token).")
    e2e_ms: float | None = Field(default=None, gt=0, le=3_600_000)


def meets(sample: Sample, slo: SloThresholds) -> bool:
    """Succeeded, and at or under every threshold set. A threshold on a value the request does
    not have (TTFT of a non-streamed request, TPOT of a one-token answer) is not met."""
    if sample.outcome is not Outcome.SUCCESS:
        return False
    checks = ((slo.ttft_ms, sample.ttft_ms), (slo.tpot_ms, sample.tpot_ms),
              (slo.ttfo_ms, sample.measurement.ttfo_ms), (slo.e2e_ms, sample.e2e_ms))
    return all(value is not None and value <= limit
               for limit, value in checks if limit is not None)
