"""What a run's throughput costs: per accelerator, per kW and per million tokens, from the
endpoint's declared deployment (pure). "Good" tokens are the output tokens of requests that
met every SLO threshold of the probe: the tokens a user was served within the SLO, which is
what the money buys; nobody else prices those."""

from __future__ import annotations

from sustain.probes.measure.deployment import Deployment, Efficiency
from sustain.probes.measure.finite import finite, ratio
from sustain.probes.measure.summary import RunSummary


def efficiency(summary: RunSummary, deployment: Deployment) -> Efficiency:
    """The run's efficiency under `deployment` (a figure whose input is missing is None)."""
    good_tps = None if summary.good_output_tokens is None \
        else ratio(summary.good_output_tokens, summary.duration_s)
    return efficiency_of(summary.output_token_throughput, good_tps, deployment)


def efficiency_of(tps: float | None, good_tps: float | None, deployment: Deployment
                  ) -> Efficiency:
    """Efficiency from output tokens per second (all, and good ones) under `deployment`.
    A figure is None when its input is missing, and a cost when no token was served (a rate
    of 0: nothing bought) or when it would not fit in a float (a denormal rate)."""
    price = deployment.price_per_hour
    tps = finite(tps)

    def per_million(rate: float | None) -> float | None:
        if price is None or rate is None:
            return None
        hourly = ratio(rate * 3600.0, 1_000_000.0)
        return None if hourly is None else ratio(price, hourly)

    return Efficiency(
        output_tps_per_accelerator=None if tps is None or deployment.accelerators is None
        else ratio(tps, deployment.accelerators),
        output_tps_per_kw=None if tps is None or deployment.power_kw is None
        else ratio(tps, deployment.power_kw),
        cost_per_million_output_tokens=per_million(tps),
        cost_per_million_good_tokens=per_million(good_tps),
        currency=deployment.currency)
