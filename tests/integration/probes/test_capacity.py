"""Capacity under SLO and the Pareto curve against a simulator with an exactly known knee:
it serves 8 generations at once and queues the rest, so from 9 users on some
request waits for a whole generation before its first token.

The numbers make each level's verdict insensitive to how fast or quiet the machine is. Up to
8 users every first token comes 10 ms after the request (noise adds to that, but would have
to add 190 ms to break the 200 ms TTFT p99 SLO). From 9 users on, the users' first requests
start together (a level begins with all its users at once, on an idle simulator), 8 of them
take the slots and each later one waits until one of those ends: not before its 10 ms TTFT
plus 15 gaps of 60 ms, by the simulator's own deadlines, so its TTFT is at least 920 ms
(less only by how far apart the first requests arrive) and noise can only make it longer.
Each level's duration (0.2 s) is shorter than a generation, so each user sends one request
and the queued ones are always part of the level: 9 users give TTFTs of 8 x 10 ms and one of
>= 920 ms, whose p99 (interpolated) is about 850 ms. So 8 passes and 9 fails on any machine;
benchmarks/knee.py runs the search many times, with these numbers and with tighter ones
(20 ms TTFT, 5 ms gaps, a 60 ms SLO) where noise does move the knee, and prints what it
found. Below the knee a user streams at about 1000 / 60 ms tokens a second.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import CapacityProfile, ParetoProfile
from sustain.probes.measure.capacity_slo import CapacitySlo
from sustain.probes.measure.deployment import Deployment
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle
from tests.processes import SustainProcess, free_port

BATCH, TTFT_MS, ITL_MS, TOKENS = 8, 10, 60, 16
SLO_TTFT_MS = 500
"""Between a batched request's TTFT (10 ms) and a queued one's (a whole generation behind,
about 970 ms), with room on both sides: two loaded cores stalled a batched request's first
token past 200 ms, which put the knee at 3."""
LEVEL_S = 0.2
"""Seconds per level: shorter than a generation (910 ms), so each user sends one request."""


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
    profile = CapacityProfile(slo=CapacitySlo(ttft_ms=SLO_TTFT_MS), minimum=1, maximum=32,
                              duration_s=LEVEL_S)
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
    assert all(p.low_count for p in capacity.points), "a few requests: no p99 bound"
    assert [p.count for p in capacity.points] == levels, "one request per user and level"
    assert [s.label for s in result.stages][:2] == ["capacity 1 user", "capacity 2 users"]


async def test_a_pareto_curve_has_its_points_and_streams_at_1000_over_itl_below_the_knee(
        batched: SimulatorHandle) -> None:
    async with HttpClients() as clients:
        result = await execute(clients, target(batched), Workload(max_tokens=TOKENS),
                               ParetoProfile(max_concurrency=16, points=7, duration_s=0.5))
    points = result.pareto
    assert points is not None
    assert [p.level for p in points] == [1, 2, 3, 4, 6, 10, 16]
    for point in points:
        if point.level <= BATCH:
            # 1000 / TPOT p90; TPOT is (last token - first token) / 15 and the simulator's
            # deadlines make it 60 ms, so only a stall of 300 ms (on the first token alone)
            # or 900 ms (on the last) could move it out of this band: it catches a TPOT over
            # the wrong span or count, not noise. How exactly sustain times tokens is
            # benchmarks/accuracy.py's.
            assert point.tps_per_user is not None
            assert 0.5 * 1000 / ITL_MS <= point.tps_per_user <= 2 * 1000 / ITL_MS
    assert any(p.on_front for p in points)
    top = max(points, key=lambda p: p.system_tps or 0.0)
    assert top.on_front


async def test_efficiency_figures_are_their_formulas(batched: SimulatorHandle) -> None:
    deployment = Deployment(accelerators=4, price_per_hour=12.0, power_kw=2.5)
    profile = CapacityProfile(slo=CapacitySlo(ttft_ms=SLO_TTFT_MS), minimum=4, maximum=4,
                              duration_s=LEVEL_S)
    async with HttpClients() as clients:
        result = await execute(clients, target(batched, deployment),
                               Workload(max_tokens=TOKENS), profile,
                               SloThresholds(ttft_ms=SLO_TTFT_MS))
    summary = result.summary
    tps = summary.output_tokens_per_second
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
