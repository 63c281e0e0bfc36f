"""An endpoint's declared deployment and the efficiency figures it prices (models only; the
arithmetic is efficiency.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

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
    watts_per_accelerator: float | None = Field(
        default=None, gt=0, le=100_000,
        description="Declared power per accelerator (with accelerators), where no DCGM "
        "exporter is scraped and power_kw is not given.")
    gpus: list[Annotated[str, StringConstraints(min_length=1, max_length=64,
                                                pattern=r"^[A-Za-z0-9_.:-]+$")]] = Field(
        default_factory=list, max_length=1024,
        description="The GPUs that serve the endpoint, as the DCGM exporter at metrics_url "
        "labels them (`gpu` index or `UUID`): their power is summed; empty: every GPU it "
        "shows.")

    def declared_power_w(self) -> float | None:
        """The power the deployment declares, in W: power_kw, else accelerators times
        watts_per_accelerator; None when it declares neither."""
        if self.power_kw is not None:
            return self.power_kw * 1000.0
        if self.accelerators is not None and self.watts_per_accelerator is not None:
            return self.accelerators * self.watts_per_accelerator
        return None


class Efficiency(BaseModel):
    output_tps_per_accelerator: float | None
    output_tps_per_kw: float | None
    """Output tokens per second per kW of the power below."""
    cost_per_million_output_tokens: float | None
    """price_per_hour / (output tokens per second x 3600) x 10^6, in `currency`."""
    cost_per_million_good_tokens: float | None
    """The same over good tokens only (requests that met every SLO threshold); None
    without SLO thresholds or without a good token."""
    currency: str
    power_w: float | None = None
    """The power the figures use, in W: measured over the run (the DCGM exporter's energy
    counter over the scrapes' span, else its mean power gauge), else declared."""
    power_source: Literal["measured", "declared"] | None = None
    joules_per_output_token: float | None = None
    """power_w / output tokens per second: energy per output token, J."""
    joules_per_good_token: float | None = None
    """power_w / good output tokens per second (requests that met every SLO threshold)."""
