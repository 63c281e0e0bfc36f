"""Capacity over time, end to end: `sustain serve` runs a scheduled capacity probe
against the simulator (8 generations at once); a noisy neighbour halves the simulator's
batch limit, the next run's capacity under the SLO drops from 8 to 4, and SustainCapacityDrop
fires; /metrics shows the capacity and the capacity series API every run's.

The knee is found exactly on any machine, however slow or noisy, because the simulator makes
the outcome of each level insensitive to noise (tests/integration/probes/test_capacity.py
explains the design): up to the batch limit a request's first token comes after 10 ms, 20x
under the 200 ms SLO; past it, some request of the level's first round waits for a whole
generation (16 tokens, 60 ms apart: at least 910 ms by the simulator's own deadlines) before
its first token, and noise can only make that wait longer. benchmarks/knee.py runs the same
search many times and prints the knee found against the expected one.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.e2e.test_replicas import db
from tests.integration.service.helpers import samples_of
from tests.processes import SustainProcess, admin_client, free_port, wait_until

SIMULATOR = ["--ttft-ms", "10", "--itl-ms", "60", "--output-tokens", "16", "--max-batch", "8"]
CAPACITY = {"kind": "capacity", "slo": {"ttft_ms": 200}, "minimum": 4, "maximum": 9,
            "duration_s": 0.2}
"""Each user sends one request per level (a generation takes longer than duration_s): at 8
slots levels 4, 8, 9 (about 4 s a run); at 4 slots 4, 8, 6, 5 (about 7 s)."""


def capacities(database_url: str) -> list[int | None]:
    rows = db(database_url, "SELECT capacity FROM runs WHERE status = 'succeeded' "
                            "AND summary ? 'capacity' ORDER BY scheduled_for")
    return [row["capacity"] for row in rows]


def in_flight(database_url: str) -> int:
    rows = db(database_url, "SELECT count(*) AS n FROM runs "
                            "WHERE status IN ('pending', 'running')")
    return int(rows[0]["n"])


def simulator_idle(sim_port: int) -> bool:
    """No request generating or waiting for a slot in the simulator."""
    text = httpx.get(f"http://127.0.0.1:{sim_port}/metrics", timeout=5).text
    metrics = samples_of(text)
    return all(value == 0 for name in ("vllm:num_requests_running",
                                       "vllm:num_requests_waiting")
               for _, value in metrics[name])


def test_a_capacity_drop_fires_its_alert(tmp_path: Path, database_url: str) -> None:
    sim_port, port = free_port(), free_port()
    simulator = SustainProcess(["simulate", "--port", str(sim_port), *SIMULATOR],
                               tmp_path / "simulator.log")
    env = {"SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_ALERT_EVALUATION_S": "1",
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
            "name": "headroom", "endpoint_id": endpoint.json()["id"], "interval_s": 5,
            "profile": CAPACITY, "workload": {"max_tokens": 16}})
        assert probe.status_code == 201, probe.text
        probe_id = probe.json()["id"]

        # Waits for conditions; the timeouts only guard against a hang (runs take ~4 s).
        wait_until(lambda: len(capacities(database_url)) >= 3, 120, 0.5)
        assert capacities(database_url)[:3] == [8, 8, 8]
        metrics = samples_of(api.get("/metrics").text)
        assert [value for _, value in metrics["sustain_capacity_concurrency"]] == [8.0]
        assert not _firing(api)

        # The batch limit changes while the simulator is idle: a request in flight at the
        # switch would hand its slot back to the new limit (the simulator keeps one
        # semaphore), so the probe pauses (cancelling a run in progress) around it.
        paused = api.patch(f"/api/v1/probes/{probe_id}", json={"enabled": False})
        assert paused.status_code == 200, paused.text
        wait_until(lambda: in_flight(database_url) == 0, 60, 0.2)
        wait_until(lambda: simulator_idle(sim_port), 60, 0.2)
        r = httpx.put(f"http://127.0.0.1:{sim_port}/sim/fault", json={"max_batch": 4},
                      timeout=5)
        assert r.status_code == 200, r.text
        resumed = api.patch(f"/api/v1/probes/{probe_id}", json={"enabled": True})
        assert resumed.status_code == 200, resumed.text
        switched = time.monotonic()
        wait_until(lambda: _firing(api), 120, 0.5)
        print(f"\nSustainCapacityDrop fired {time.monotonic() - switched:.1f} s after the "
              f"batch limit halved; capacities {capacities(database_url)}")
        assert capacities(database_url)[-1] == 4
        series = api.get(f"/api/v1/probes/{probe_id}/capacity").json()["points"]
        assert [p["capacity"] for p in series][:3] == [8, 8, 8]
        assert series[-1]["capacity"] == 4
        assert all(p["system_tps"] > 0 for p in series)
        assert service.stop() == 0


def _firing(api: httpx.Client) -> bool:
    alerts = api.get("/api/v1/alerts", params={"state": "firing"}).json()["items"]
    return any(a["labels"]["alertname"] == "SustainCapacityDrop" for a in alerts)
