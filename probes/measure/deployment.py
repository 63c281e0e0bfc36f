"""An endpoint's declared deployment and the efficiency figures it prices (models only; the
arithmetic is efficiency.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from sustain.probes.inputs import InputModel


class Deployment(InputModel):
    """What serves the endpoint (all optional): count accelerators of every role (prefill
    and decode)."""

    accelerator: str | None = Field(default=None, max_length=200,
                                    description="e.g. H100-80GB.")
    accelerators: int | None = Field(default=None, ge=1, le=1_000_000)
    price_per_hour: float | None = Field(
        default=None, ge=0, le=1_000_000_000, description="The whole deployment's price.")
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    power_kw: float | None = Field(default=None, gt=0, le=1_000_000,
                                   description="The whole deployment's power draw.")


class Efficiency(BaseModel):
    output_tps_per_accelerator: float | None
    output_tps_per_kw: float | None
    cost_per_million_output_tokens: float | None
    """price_per_hour / (output tokens per second x 3600) x 10^6, in `currency`."""
    cost_per_million_good_tokens: float | None
    """The same over good tokens only (requests that met every SLO threshold); None
    without SLO thresholds or without a good token."""
    currency: str
