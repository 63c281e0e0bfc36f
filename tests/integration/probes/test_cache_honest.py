"""Against a server that caches prompt prefixes (the simulator: 16-token blocks, 1 ms of
TTFT per uncached prompt token), a default probe measures a cold prefill on every run, while
`cache: allow` shows the cached path from the second run on, and a shared prefix is served
from the cache by design (repeated runs must never measure the cache's TTFT).

A cold prefill's TTFT has a floor set by the simulator (COLD_MS), which noise can only raise;
a cached one is compared with the cold one of the same test, or with that floor, with margins
of 5x or more, so noise would have to add over 40 ms to most requests to tip a verdict."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle
from tests.processes import SustainProcess, free_port

PROMPT = 200
BASE_MS, PREFILL_MS = 1.0, 1.0
COLD_MS = BASE_MS + PREFILL_MS * PROMPT
"""TTFT of a prompt with nothing cached: base 1 ms plus the prefill of 200 tokens."""


@pytest.fixture(scope="module")
def caching_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorHandle]:
    port = free_port()
    log = tmp_path_factory.mktemp("caching") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", f"{BASE_MS:g}",
                         "--itl-ms", "1", "--output-tokens", "4",
                         "--prefill-ms-per-token", f"{PREFILL_MS:g}"], log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield SimulatorHandle(f"http://127.0.0.1:{port}/v1")


async def run(server: SimulatorHandle, **workload: Any) -> RunResult:
    target = Target(base_url=server.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m")
    async with HttpClients() as clients:
        return await execute(clients, target,
                             Workload(input_tokens=PROMPT, max_tokens=4, **workload),
                             ConcurrencyProfile(users=1, max_requests=8))


async def test_a_default_probe_measures_a_cold_prefill_on_every_run(
        caching_server: SimulatorHandle) -> None:
    for _ in range(3):
        result = await run(caching_server)
        assert result.summary.successes == 8
        assert result.summary.cached_tokens == 0
        assert result.summary.cache_hit_ratio == 0.0
        assert all(s.measurement.input_tokens == PROMPT for s in result.samples)
        assert (result.summary.ttft_ms.p50 or 0.0) >= COLD_MS


async def test_allowing_the_cache_measures_the_cached_path_from_the_second_run(
        caching_server: SimulatorHandle) -> None:
    first = await run(caching_server, cache="allow", seed=77)
    second = await run(caching_server, cache="allow", seed=77)
    assert first.summary.cache_hit_ratio == 0.0
    assert second.summary.cache_hit_ratio == pytest.approx(192 / 200)
    cold = first.summary.ttft_ms.p50 or 0.0
    assert cold >= COLD_MS
    # The cached path: 1 ms + 8 uncached tokens (9 ms) against the cold run's >= 201 ms.
    assert (second.summary.ttft_ms.p50 or 0.0) < cold / 4


async def test_a_shared_prefix_is_served_from_the_cache_and_the_rest_stays_cold(
        caching_server: SimulatorHandle) -> None:
    await run(caching_server, shared_prefix_tokens=160, seed=5)  # the prefix is cached now
    result = await run(caching_server, shared_prefix_tokens=160, seed=5)
    assert {s.measurement.cached_tokens for s in result.samples} == {160}
    assert result.summary.cache_hit_ratio == pytest.approx(160 / 200)
    ttft = result.summary.ttft_ms.p50 or 0.0
    # 40 uncached tokens: at least 41 ms (the simulator's floor), and about that, far under
    # the >= 201 ms of a cold prefill.
    assert BASE_MS + PREFILL_MS * 40 <= ttft < COLD_MS
