"""Efficiency arithmetic: tokens per second per kW and joules per token from the power a DCGM
exporter measured over the run (its energy counter over the scrapes' span, else its power
gauge), else from the deployment's declared power; costs per million tokens from its price."""

from __future__ import annotations

import pytest

from sustain.probes.measure.deployment import Deployment
from sustain.probes.measure.efficiency import efficiency_of, measured_power_w, window_power_w
from sustain.probes.measure.server_metrics import ServerMetric


def metric(mean: float, increase: float | None = None, span_s: float | None = 10.0
           ) -> ServerMetric:
    return ServerMetric(min=mean, mean=mean, max=mean, last=mean, points=11,
                        increase=increase, span_s=span_s)


def test_the_energy_counter_over_its_span_gives_the_mean_power() -> None:
    # 2 GPUs at 300 W for 10 s: 6,000 J, 6,000,000 mJ
    metrics = {"gpu_energy_mj": metric(0.0, increase=6_000_000.0),
               "gpu_power_w": metric(250.0)}
    assert measured_power_w(metrics) == pytest.approx(600.0)


def test_without_a_usable_counter_the_power_gauge_is_read() -> None:
    assert measured_power_w({"gpu_power_w": metric(450.0)}) == 450.0
    restarted = {"gpu_energy_mj": metric(0.0, increase=-5.0), "gpu_power_w": metric(450.0)}
    assert measured_power_w(restarted) == 450.0
    too_short = {"gpu_energy_mj": metric(0.0, increase=100.0, span_s=0.1),
                 "gpu_power_w": metric(450.0)}
    assert measured_power_w(too_short) == 450.0
    assert measured_power_w({}) is None
    assert measured_power_w(None) is None


def test_measured_power_prices_tokens_per_kw_and_joules_per_token() -> None:
    figures = efficiency_of(1200.0, 900.0, Deployment(accelerators=2, power_kw=5.0),
                            measured_w=600.0)
    assert figures.power_source == "measured"
    assert figures.power_w == 600.0
    assert figures.output_tps_per_kw == pytest.approx(1200.0 / 0.6)
    assert figures.joules_per_output_token == pytest.approx(600.0 / 1200.0)
    assert figures.joules_per_good_token == pytest.approx(600.0 / 900.0)
    assert figures.output_tps_per_accelerator == 600.0


@pytest.mark.parametrize(("deployment", "watts"), [
    (Deployment(power_kw=1.5), 1500.0),
    (Deployment(accelerators=4, watts_per_accelerator=700.0), 2800.0),
    (Deployment(accelerators=4, watts_per_accelerator=700.0, power_kw=2.0), 2000.0),
])
def test_without_a_measurement_the_declared_power_is_used(deployment: Deployment,
                                                          watts: float) -> None:
    figures = efficiency_of(100.0, None, deployment)
    assert (figures.power_source, figures.power_w) == ("declared", watts)
    assert figures.joules_per_output_token == pytest.approx(watts / 100.0)
    assert figures.joules_per_good_token is None


def test_no_power_and_no_tokens_give_no_energy_figures() -> None:
    none = efficiency_of(100.0, 50.0, Deployment(accelerators=1))
    assert (none.power_w, none.power_source, none.output_tps_per_kw,
            none.joules_per_output_token) == (None, None, None, None)
    idle = efficiency_of(0.0, 0.0, Deployment(power_kw=1.0))
    assert idle.joules_per_output_token is None  # nothing served: no energy per token
    assert idle.output_tps_per_kw == 0.0


def test_a_windows_power_weights_each_run_by_its_measured_time() -> None:
    # 600 W for 10 s and 300 W for 30 s: 15 kJ over 40 s
    assert window_power_w([(600.0, 10.0), (None, 50.0), (300.0, 30.0)]) == 375.0
    assert window_power_w([(None, 10.0), (500.0, 0.0)]) is None
