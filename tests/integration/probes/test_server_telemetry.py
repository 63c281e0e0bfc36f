"""Server telemetry beside the client's figures: during a run that saturates the
simulator (2 generations at once, 8 users), its vLLM-named /metrics, scraped in a process of
its own, show the queue building up; a scrape that fails never fails the run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle
from tests.processes import SustainProcess, free_port

USERS, BATCH = 8, 2


@pytest.fixture(scope="module")
def saturable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorHandle]:
    port = free_port()
    log = tmp_path_factory.mktemp("saturable") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", "20", "--itl-ms", "5",
                         "--output-tokens", "16", "--max-batch", str(BATCH)], log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield SimulatorHandle(f"http://127.0.0.1:{port}/v1")


def target(server: SimulatorHandle, metrics_path: str = "/metrics") -> Target:
    root = server.base_url.removesuffix("/v1")
    return Target(base_url=server.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m",
                  metrics_url=root + metrics_path, metrics_interval_s=0.2,
                  metrics_names=("vllm:generation_tokens_total",))


def check_queue(result: RunResult) -> None:
    metrics = result.summary.server_metrics
    assert metrics is not None
    assert metrics["running"].max == BATCH
    assert metrics["waiting"].max >= USERS - BATCH - 2  # users between two requests
    assert metrics["kv_cache_usage"].max == 1.0
    assert (metrics["prefix_cache_queries"].increase or 0) > 0
    assert (metrics["vllm:generation_tokens_total"].increase or 0) > 0
    scrapes = result.summary.server_scrapes
    assert scrapes is not None
    assert scrapes.failures == {}
    assert scrapes.scrapes >= 5  # about 2 s at 0.2 s
    assert len(result.server_series["waiting"]) == metrics["waiting"].points


async def test_a_saturating_run_shows_the_servers_queue(saturable: SimulatorHandle) -> None:
    async with HttpClients() as clients:
        result = await execute(clients, target(saturable), Workload(max_tokens=16),
                               ConcurrencyProfile(users=USERS, duration_s=2))
    assert result.summary.successes > 0
    check_queue(result)


async def test_workers_read_the_server_from_the_parent(saturable: SimulatorHandle) -> None:
    async with WorkerPool(2) as pool:
        result = await pool.measure(target(saturable), Workload(max_tokens=16),
                                    ConcurrencyProfile(users=USERS, duration_s=2, workers=2))
    check_queue(result)


async def test_a_failing_scrape_never_fails_the_run(saturable: SimulatorHandle) -> None:
    async with HttpClients() as clients:
        missing = await execute(clients, target(saturable, "/nowhere"), Workload(max_tokens=4),
                                ConcurrencyProfile(users=1, duration_s=1))
    assert missing.summary.failures == 0
    assert missing.summary.successes > 0
    assert missing.summary.server_metrics == {}
    scrapes = missing.summary.server_scrapes
    assert scrapes is not None
    assert set(scrapes.failures) == {"http 404"}


async def test_the_scraper_keeps_to_the_egress_policy(saturable: SimulatorHandle) -> None:
    denied = EgressPolicy.parse(denied="127.0.0.0/8")
    async with HttpClients(egress=EgressPolicy()) as clients:
        result = await execute(clients, target(saturable), Workload(max_tokens=4),
                               ConcurrencyProfile(users=1, max_requests=2))
        assert result.summary.server_scrapes is not None
        assert result.summary.server_scrapes.failures == {}
    async with HttpClients(egress=denied) as clients:
        result = await execute(clients, target(saturable), Workload(max_tokens=4),
                               ConcurrencyProfile(users=1, max_requests=2))
    scrapes = result.summary.server_scrapes
    assert scrapes is not None
    assert set(scrapes.failures) == {"egress denied"}
