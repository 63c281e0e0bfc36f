"""Capacity under SLO and the Pareto curve against a simulator with an exactly known knee
(issue 17): it serves 8 generations at once (20 ms to the first token, then 5 ms a token, 16
tokens: 95 ms each) and queues the rest, so from 9 users on some request waits for a whole
generation before its first token. A TTFT p99 SLO of 60 ms, between the unqueued 20 ms and
the queued ~115 ms, passes 8 and fails 9; below the knee a user streams at 1000 / 5 ms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import CapacityProfile, CapacitySlo, ParetoProfile
from sustain.probes.measure.deployment import Deployment
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle
from tests.processes import SustainProcess, free_port

BATCH, TTFT_MS, ITL_MS, TOKENS = 8, 20, 5, 16


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorHandle]:
    port = free_port()
    log = tmp_path_factory.mktemp("knee") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", str(TTFT_MS),
                         "--itl-ms", str(ITL_MS), "--output-tokens", str(TOKENS),
                         "--max-batch", str(BATCH)], log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield SimulatorHandle(f"http://127.0.0.1:{port}/v1")


def target(server: SimulatorHandle, deployment: Deployment | None = None) -> Target:
    return Target(base_url=server.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m",
                  deployment=deployment)


async def test_the_capacity_search_finds_the_batch_limit_exactly(
        batched: SimulatorHandle) -> None:
    profile = CapacityProfile(slo=CapacitySlo(ttft_ms=60), minimum=1, maximum=32,
                              duration_s=1.5)
    async with HttpClients() as clients:
        result = await execute(clients, target(batched), Workload(max_tokens=TOKENS),
                               profile)
    capacity = result.capacity
    assert capacity is not None
    assert (capacity.max_passing, capacity.first_failing) == (8, 9)
    levels = [p.level for p in capacity.points]
    assert levels == [1, 2, 4, 8, 9, 10, 12, 16], "doubling, then bisection, each level once"
    assert [p.passed for p in capacity.points] == [True] * 4 + [False] * 4
    failing = next(p for p in capacity.points if p.level == 9)
    assert failing.reason is not None
    assert failing.reason.startswith("TTFT p99")
    assert all(p.low_count for p in capacity.points), "a few hundred requests: no p99 bound"
    assert [s.label for s in result.stages][:2] == ["capacity 1 users", "capacity 2 users"]


async def test_a_pareto_curve_has_its_points_and_streams_at_1000_over_itl_below_the_knee(
        batched: SimulatorHandle) -> None:
    async with HttpClients() as clients:
        result = await execute(clients, target(batched), Workload(max_tokens=TOKENS),
                               ParetoProfile(max_concurrency=16, points=7, duration_s=1.0))
    points = result.pareto
    assert points is not None
    assert [p.level for p in points] == [1, 2, 3, 4, 6, 10, 16]
    for point in points:
        if point.level <= BATCH:
            assert point.tps_per_user == pytest.approx(1000 / ITL_MS, rel=0.1)
    assert any(p.on_front for p in points)
    top = max(points, key=lambda p: p.system_tps or 0.0)
    assert top.on_front


async def test_efficiency_figures_are_their_formulas(batched: SimulatorHandle) -> None:
    deployment = Deployment(accelerators=4, price_per_hour=12.0, power_kw=2.5)
    profile = CapacityProfile(slo=CapacitySlo(ttft_ms=60), minimum=4, maximum=4,
                              duration_s=1.0)
    async with HttpClients() as clients:
        result = await execute(clients, target(batched, deployment),
                               Workload(max_tokens=TOKENS), profile, SloThresholds(ttft_ms=60))
    summary = result.summary
    tps = summary.output_token_throughput
    assert tps is not None
    assert summary.efficiency is not None
    figures = summary.efficiency
    assert figures.output_tps_per_accelerator == pytest.approx(tps / 4)
    assert figures.output_tps_per_kw == pytest.approx(tps / 2.5)
    assert figures.cost_per_million_output_tokens == pytest.approx(12.0 / (tps * 3600) * 1e6)
    good = summary.good_output_tokens
    assert good is not None
    assert good > 0
    assert figures.cost_per_million_good_tokens == pytest.approx(
        12.0 / (good / summary.duration_s * 3600) * 1e6)
    assert figures.currency == "USD"
