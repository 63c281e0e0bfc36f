"""Energy per token against a fake DCGM exporter: the simulator, given a constant power, also
exposes dcgm-exporter's power gauge and energy counter for its GPUs. A run scraping it reports
the power it measured, and its tokens per second per kW and joules per output token match the
arithmetic on the run's own throughput within 1 %."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.measure.deployment import Deployment
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

WATTS = 310.0
GPUS = 4


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=5.0, itl_ms=2.0, output_tokens=16, gpu_power_w=WATTS,
                             gpus=GPUS)
    with BackgroundSimulator(config) as server:
        yield server


async def run(client: HttpClients, sim: BackgroundSimulator, deployment: Deployment
              ) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m",
                    metrics_url=sim.base_url.removesuffix("/v1") + "/metrics",
                    metrics_interval_s=0.2, deployment=deployment)
    return await execute(client, target, Workload(max_tokens=16),
                         ConcurrencyProfile(users=4, duration_s=1.0))


async def test_measured_power_gives_tokens_per_kw_and_joules_per_token(
        client: HttpClients, sim: BackgroundSimulator) -> None:
    result = await run(client, sim, Deployment(accelerators=GPUS))
    summary = result.summary
    figures = summary.efficiency
    assert figures is not None
    assert figures.power_source == "measured"
    watts = WATTS * GPUS
    assert figures.power_w == pytest.approx(watts, rel=0.01)
    tps = summary.output_tokens_per_second
    assert tps is not None
    assert tps > 0
    assert figures.output_tps_per_kw == pytest.approx(tps / (watts / 1000), rel=0.01)
    assert figures.joules_per_output_token == pytest.approx(watts / tps, rel=0.01)
    assert summary.server_metrics is not None
    assert summary.server_metrics["gpu_power_w"].mean == pytest.approx(watts)


async def test_only_the_gpus_serving_the_endpoint_are_counted(
        client: HttpClients, sim: BackgroundSimulator) -> None:
    result = await run(client, sim, Deployment(gpus=["0", "GPU-sim-0002"]))
    figures = result.summary.efficiency
    assert figures is not None
    assert figures.power_w == pytest.approx(2 * WATTS, rel=0.01)
