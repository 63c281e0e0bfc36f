"""The service reads an endpoint's server metrics beside every run: the run's
summary has each series' min, mean, max and last, the series are stored with the run and
served at /runs/{id}/server-metrics, and metrics_url is held to the egress policy and may
carry no credentials."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import create_endpoint, create_probe
from tests.integration.service.test_reach import app_with, refused, run_now
from tests.processes import SustainProcess, free_port


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorHandle]:
    port = free_port()
    log = tmp_path_factory.mktemp("batched") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", "20", "--itl-ms", "5",
                         "--output-tokens", "16", "--max-batch", "2"], log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield SimulatorHandle(f"http://127.0.0.1:{port}/v1")


async def test_a_run_keeps_the_servers_queue_beside_its_own_figures(
        database_url: str, batched: SimulatorHandle) -> None:
    root = batched.base_url.removesuffix("/v1")
    async with app_with(database_url) as api:
        endpoint = await create_endpoint(api, batched.base_url,
                                         metrics_url=f"{root}/metrics",
                                         metrics_interval_s=0.2)
        assert endpoint["metrics_url"] == f"{root}/metrics"
        probe = await create_probe(api, endpoint["id"], enabled=False, profile={
            "kind": "concurrency", "users": 8, "duration_s": 2}, workload={"max_tokens": 16})
        run = await run_now(api, probe["id"])
        assert run["status"] == "succeeded", run
        metrics = run["summary"]["server_metrics"]
        assert metrics["running"]["max"] == 2
        assert metrics["waiting"]["max"] >= 4
        assert run["summary"]["server_scrapes"]["failures"] == {}
        telemetry = (await api.get(f"/api/v1/runs/{run['id']}/server-metrics")).json()
        series = {s["name"]: s for s in telemetry["series"]}
        assert len(series["waiting"]["value"]) == metrics["waiting"]["points"] >= 5
        assert max(series["waiting"]["value"]) == metrics["waiting"]["max"]
        assert len(series["waiting"]["at"]) == len(series["waiting"]["value"])


async def test_metrics_url_is_held_to_the_egress_policy_and_carries_no_credentials(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    for url in ("http://169.254.169.254/metrics", "http://user:pw@127.0.0.1/metrics",
                "http://127.0.0.1/metrics?token=abc"):
        refused(await api.post("/api/v1/endpoints", json={
            "name": "m", "base_url": simulator.base_url, "model": "m", "metrics_url": url}),
            "metrics_url")
    refused(await api.post("/api/v1/endpoints", json={
        "name": "m", "base_url": simulator.base_url, "model": "m",
        "metrics_names": ["not a name"]}), "metrics_names.0")
    refused(await api.post("/api/v1/endpoints", json={
        "name": "m", "base_url": simulator.base_url, "model": "m",
        "metrics_interval_s": 0.01}), "metrics_interval_s")


async def test_a_windows_efficiency_uses_the_power_its_runs_measured(
        database_url: str) -> None:
    """The endpoint declares 1 kW per GPU; its DCGM exporter (the simulator) says 310 W: the
    window's efficiency, as each run's, prices the measured power."""
    config = SimulatorConfig(ttft_ms=5.0, itl_ms=2.0, output_tokens=16, gpu_power_w=310.0,
                             gpus=2)
    with BackgroundSimulator(config) as sim:
        async with app_with(database_url) as api:
            endpoint = await create_endpoint(
                api, sim.base_url, metrics_url=sim.base_url.removesuffix("/v1") + "/metrics",
                metrics_interval_s=0.2,
                deployment={"accelerators": 2, "watts_per_accelerator": 1000})
            probe = await create_probe(api, endpoint["id"], enabled=False, profile={
                "kind": "concurrency", "users": 2, "duration_s": 1}, workload={"max_tokens": 16})
            runs = [await run_now(api, probe["id"]) for _ in range(2)]
            window = (await api.get(f"/api/v1/probes/{probe['id']}/summary")).json()
    assert [run["summary"]["efficiency"]["power_source"] for run in runs] == ["measured"] * 2
    efficiency = window["efficiency"]
    assert efficiency["power_source"] == "measured"
    assert efficiency["power_w"] == pytest.approx(620.0, rel=0.01)
    tps = window["output_tokens_per_second"]
    assert efficiency["joules_per_output_token"] == pytest.approx(efficiency["power_w"] / tps)
    assert efficiency["output_tps_per_kw"] == pytest.approx(tps / efficiency["power_w"] * 1000)
