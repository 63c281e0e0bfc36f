"""What a run's throughput costs: per accelerator, per kW, joules per token and per million
tokens, from the endpoint's declared deployment and, for power, what its DCGM exporter measured
over the run (pure). "Good" tokens are the output tokens of requests that met every SLO
threshold of the probe: the tokens a user was served within the SLO, which is what the money
and the energy buy; nobody else prices those."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sustain.probes.measure.deployment import Deployment, Efficiency
from sustain.probes.measure.finite import finite, ratio
from sustain.probes.measure.server_metrics import ServerMetric
from sustain.probes.measure.summary import RunSummary

MIN_ENERGY_SPAN_S = 0.5
"""The energy counter is read over at least this many seconds of scrapes, else the power gauge
is (two scrapes moments apart say little of a rate)."""


def measured_power_w(metrics: Mapping[str, ServerMetric] | None) -> float | None:
    """The GPUs' mean power over a run, in W: the DCGM energy counter's increase (mJ) over the
    scrapes' span, else the mean of the power gauge (W); None without either (or with a
    counter that went back: an exporter restart)."""
    if not metrics:
        return None
    energy = metrics.get("gpu_energy_mj")
    if energy is not None and energy.increase is not None and energy.increase > 0 \
            and energy.span_s is not None and energy.span_s >= MIN_ENERGY_SPAN_S:
        return ratio(energy.increase / 1000.0, energy.span_s)
    power = metrics.get("gpu_power_w")
    return None if power is None or power.mean <= 0 else power.mean


def window_power_w(runs: Iterable[tuple[float | None, float]]) -> float | None:
    """The mean power over a window's runs, in W, from (measured power W or None, measured
    seconds) per run: each run's power weighted by its measured time, over the runs that
    measured one (energy over their time); None when none did."""
    joules = seconds = 0.0
    for power_w, measured_s in runs:
        if power_w is not None and measured_s > 0:
            joules += power_w * measured_s
            seconds += measured_s
    return ratio(joules, seconds) if seconds > 0 else None


def efficiency(summary: RunSummary, deployment: Deployment) -> Efficiency:
    """The run's efficiency under `deployment` (a figure whose input is missing is None):
    power as measured over the run where the endpoint's metrics_url is a DCGM exporter, else
    as declared."""
    good_tps = None if summary.good_output_tokens is None \
        else ratio(summary.good_output_tokens, summary.duration_s)
    return efficiency_of(summary.output_tokens_per_second, good_tps, deployment,
                         measured_power_w(summary.server_metrics))


def efficiency_of(tps: float | None, good_tps: float | None, deployment: Deployment,
                  measured_w: float | None = None) -> Efficiency:
    """Efficiency from output tokens per second (all, and good ones) under `deployment`,
    with `measured_w` (W) over the declared power when given. A figure is None when its input
    is missing, and a cost (money or energy) when no token was served (a rate of 0: nothing
    bought) or when it would not fit in a float (a denormal rate)."""
    price = deployment.price_per_hour
    tps = finite(tps)
    power_w = measured_w if measured_w is not None else deployment.declared_power_w()
    source = None if power_w is None else "measured" if measured_w is not None else "declared"

    def joules(rate: float | None) -> float | None:
        return None if power_w is None or rate is None or rate <= 0 else ratio(power_w, rate)

    def per_million(rate: float | None) -> float | None:
        if price is None or rate is None:
            return None
        hourly = ratio(rate * 3600.0, 1_000_000.0)
        return None if hourly is None else ratio(price, hourly)

    return Efficiency(
        output_tps_per_accelerator=None if tps is None or deployment.accelerators is None
        else ratio(tps, deployment.accelerators),
        output_tps_per_kw=None if tps is None or power_w is None
        else ratio(tps, power_w / 1000.0),
        cost_per_million_output_tokens=per_million(tps),
        cost_per_million_good_tokens=per_million(good_tps),
        currency=deployment.currency,
        power_w=power_w, power_source=source,
        joules_per_output_token=joules(tps), joules_per_good_token=joules(finite(good_tps)))
