"""Capacity over time, end to end (issue 17): `sustain serve` runs a scheduled capacity probe
against the simulator (8 generations at once); a noisy neighbour halves the simulator's
batch limit, the next run's capacity under the SLO drops from 8 to 4, and SustainCapacityDrop
fires; /metrics shows the capacity and the capacity series API every run's."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.e2e.test_replicas import db
from tests.integration.service.helpers import samples_of
from tests.processes import SustainProcess, admin_client, free_port, wait_until

CAPACITY = {"kind": "capacity", "slo": {"ttft_ms": 60}, "minimum": 2, "maximum": 16,
            "duration_s": 0.6}
"""Levels 2, 4, 8, 16, 12, 10, 9 at 8 slots: about 4.5 s a run."""


def capacities(database_url: str) -> list[int | None]:
    rows = db(database_url, "SELECT capacity FROM runs WHERE status = 'succeeded' "
                            "AND summary ? 'capacity' ORDER BY scheduled_for")
    return [row["capacity"] for row in rows]


def test_a_capacity_drop_fires_its_alert(tmp_path: Path, database_url: str) -> None:
    sim_port, port = free_port(), free_port()
    simulator = SustainProcess(
        ["simulate", "--port", str(sim_port), "--ttft-ms", "20", "--itl-ms", "5",
         "--output-tokens", "16", "--max-batch", "8"], tmp_path / "simulator.log")
    env = {"SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_ALERT_EVALUATION_SECONDS": "1",
           "SUSTAIN_LOG_LEVEL": "info"}
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log", env=env)
    with simulator, service:
        simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
        service.wait_http(f"http://127.0.0.1:{port}/readyz")
        api = admin_client(f"http://127.0.0.1:{port}")
        endpoint = api.post("/api/v1/endpoints", json={
            "name": "sim", "base_url": f"http://127.0.0.1:{sim_port}/v1", "model": "m"})
        assert endpoint.status_code == 201, endpoint.text
        probe = api.post("/api/v1/probes", json={
            "name": "headroom", "endpoint_id": endpoint.json()["id"], "interval_seconds": 6,
            "profile": CAPACITY, "workload": {"max_tokens": 16}})
        assert probe.status_code == 201, probe.text

        wait_until(lambda: len(capacities(database_url)) >= 3, 90, 0.5)
        assert capacities(database_url)[:3] == [8, 8, 8]
        metrics = samples_of(api.get("/metrics").text)
        assert [value for _, value in metrics["sustain_capacity_concurrency"]] == [8.0]
        assert not _firing(api)

        r = httpx.put(f"http://127.0.0.1:{sim_port}/sim/fault", json={"max_batch": 4},
                      timeout=5)
        assert r.status_code == 200, r.text
        switched = time.monotonic()
        wait_until(lambda: _firing(api), 60, 0.5)
        print(f"\nSustainCapacityDrop fired {time.monotonic() - switched:.1f} s after the "
              f"batch limit halved; capacities {capacities(database_url)}")
        assert capacities(database_url)[-1] == 4
        series = api.get(f"/api/v1/probes/{probe.json()['id']}/capacity").json()["points"]
        assert [p["capacity"] for p in series][:3] == [8, 8, 8]
        assert series[-1]["capacity"] == 4
        assert all(p["system_tps"] > 0 for p in series)
        assert service.stop() == 0


def _firing(api: httpx.Client) -> bool:
    alerts = api.get("/api/v1/alerts", params={"state": "firing"}).json()
    return any(a["labels"]["alertname"] == "SustainCapacityDrop" for a in alerts)
