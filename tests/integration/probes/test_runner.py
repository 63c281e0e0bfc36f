"""Profiles end to end against the simulator process: stages, warmup, closed loop, sweep stop."""

from __future__ import annotations

import asyncio
import time

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
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.runner import RunBudget, RunStop, execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER
from tests.conftest import SimulatorHandle

SHORT = Workload(max_tokens=4)



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
    assert first.summary.attempts == 10  # an open loop sends its schedule, late or not
    # Two users for 1 s of requests that each take at least 50 + 3 x 10 ms: at least one
    # request (unless a request took the whole second: a hang), at most 13 a user.
    assert 0 < second.summary.attempts <= 2 * 13
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
    assert result.summary.goodput == pytest.approx(result.summary.requests_per_second)


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


async def test_a_run_budget_stops_closed_loop_users_at_the_request_limit(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    profile = ConcurrencyProfile(users=2, duration_s=60)
    async with asyncio.timeout(30):  # a hang guard: 10 requests take well under a second
        result = await execute(client, target(simulator), SHORT, profile,
                               budget=RunBudget(seconds=60, requests=10))
    assert result.stopped == "stopped at the limit of 10 requests per run"
    assert 8 <= result.summary.attempts <= 10, "the requests in flight at the limit are dropped"
    assert result.summary.attempts == len(result.samples) == result.stages[0].summary.attempts


async def test_a_run_budget_paces_a_closed_loop_of_many_users_to_its_max_rate(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    """200 users against the simulator would send hundreds of requests a second; the budget
    holds them to 20/s. The bound is on the count, against the configured rate: a slow
    machine only sends fewer."""
    profile = ConcurrencyProfile(users=200, duration_s=1.0)
    began = time.perf_counter()
    async with asyncio.timeout(30):  # a hang guard: the stage lasts about a second
        result = await execute(client, target(simulator), SHORT, profile,
                               budget=RunBudget(seconds=60, requests=1_000_000, max_rate=20))
    elapsed = time.perf_counter() - began
    assert 0 < result.summary.attempts <= 1 + 20 * elapsed


async def test_a_run_budget_stops_a_run_at_the_time_limit(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    profile = ConcurrencyProfile(users=2, max_requests=1_000_000)
    async with asyncio.timeout(10):  # a hang guard: the budget stops the run at 0.5 s
        result = await execute(client, target(simulator), SHORT, profile,
                               budget=RunBudget(seconds=0.5, requests=1_000_000))
    assert result.stopped == "stopped at the limit of 0.5 s per run"
    assert result.summary.attempts > 0


async def test_a_stopped_run_keeps_what_it_measured_in_every_stage_so_far(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    profile = StepsProfile(stages=[Step(rate=20, duration_s=0.5),
                                   Step(rate=20, duration_s=60)])
    stop = RunStop()
    seen: list[Sample] = []

    def measured(sample: Sample) -> None:
        seen.append(sample)
        if sum(s.stage == 1 for s in seen) >= 5:  # stopped once the second stage is going
            stop.set("cancelled")

    async with asyncio.timeout(30):  # a hang guard: the stop comes about 0.8 s in
        result = await execute(client, target(simulator), SHORT, profile, stop=stop,
                               on_sample=measured)
    assert result.stopped == "cancelled"
    first, second = result.stages
    assert first.summary.attempts == 10
    assert 5 <= second.summary.attempts < 20 * 60, "stopped, not run for its 60 s"
    assert second.summary.attempts == sum(s.stage == 1 for s in seen)
    # The stopped stage's measured time: from its first intended send to the end of its last
    # response, whatever those came to on this machine.
    stage = [s for s in result.samples if s.stage == 1]
    begin = min(s.t_sched_ms or 0.0 for s in stage)
    end = max(s.t_send_ms + s.e2e_ms for s in stage)
    assert second.summary.duration_s == pytest.approx((end - begin) / 1000.0, rel=1e-9)
    assert result.summary.attempts == len(result.samples) == len(seen)
    assert [s.seq for s in result.samples] == sorted(s.seq for s in result.samples)
