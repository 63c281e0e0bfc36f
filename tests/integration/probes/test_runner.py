"""Profiles end to end against the simulator process: stages, warmup, closed loop, sweep stop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.live import LiveStats
from sustain.probes.load.profiles import (
    ConcurrencyProfile,
    PoissonProfile,
    Step,
    StepsProfile,
    SweepProfile,
)
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER
from tests.conftest import SimulatorHandle

SHORT = Workload(max_tokens=4)


@pytest.fixture
async def client() -> AsyncIterator[HttpClients]:
    async with HttpClients() as clients:
        yield clients


def target(sim: SimulatorHandle, **headers: str) -> Target:
    return Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m",
                  headers=headers)


async def test_steps_give_one_result_per_stage_and_an_overall_summary(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    profile = StepsProfile(stages=[Step(rate=10, duration_s=1), Step(concurrency=2, duration_s=1)],
                           warmup_s=0.2)
    result = await execute(client, target(simulator), SHORT, profile)
    first, second = result.stages
    assert first.label == "rate 10/s"
    assert first.summary.attempts == 10
    assert second.summary.attempts >= 10
    assert second.summary.lag_ms.count == 0
    assert result.summary.attempts == first.summary.attempts + second.summary.attempts
    assert {s.stage for s in result.samples} == {0, 1}
    report = result.report()
    assert [s.label for s in report.stages] == ["rate 10/s", "concurrency 2"]


async def test_poisson_profile_with_goodput(client: HttpClients,
                                            simulator: SimulatorHandle) -> None:
    live = LiveStats()
    result = await execute(client, target(simulator), SHORT,
                           PoissonProfile(rate=20, duration_s=1.5, seed=1),
                           SloThresholds(ttft_ms=500), live=live)
    assert live.sent == result.summary.attempts
    assert live.in_flight == 0
    assert result.summary.availability == 1.0
    assert result.summary.goodput == pytest.approx(result.summary.request_throughput)


async def test_concurrency_profile_reaches_its_request_count(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    result = await execute(client, target(simulator), SHORT,
                           ConcurrencyProfile(users=4, max_requests=20))
    assert result.summary.attempts == 20
    assert result.summary.corrected_e2e_ms.count == 0


async def test_sweep_stops_escalating_after_the_level_that_breaks_availability(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    failing = target(simulator, **{FAULT_HEADER: "http_500"})
    result = await execute(client, failing, SHORT,
                           SweepProfile(levels=[1, 2, 4], duration_s=0.3, min_availability=0.5))
    assert len(result.stages) == 1
    assert result.stopped is not None
    assert "availability" in result.stopped


def test_the_lean_transport_runs_under_uvloop(simulator: SimulatorHandle) -> None:
    """The service runs on uvloop (uvicorn picks it), whose transports differ from asyncio's."""
    import uvloop

    async def run() -> int:
        async with HttpClients() as clients:
            result = await execute(clients, target(simulator), SHORT,
                                   ConcurrencyProfile(users=2, max_requests=6))
            return result.summary.successes

    assert uvloop.run(run()) == 6
