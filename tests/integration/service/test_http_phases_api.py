"""A probe that opens a new connection per request, through the service: its run's summary,
its samples (JSON and CSV, with each request's trace id), the probe's window and its
comparison row all carry the HTTP phases."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator

import httpx
import pytest

from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.integration.service.helpers import create_endpoint, create_probe, wait_for_run

REQUESTS = 5
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=5, itl_ms=1, output_tokens=4)) as server:
        yield server


async def test_a_probe_with_new_connections_stores_its_phases_everywhere_they_are_read(
        api: httpx.AsyncClient, sim: BackgroundSimulator) -> None:
    endpoint = await create_endpoint(api, sim.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               workload={"connection": "new", "input_tokens": 8},
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.5})
    assert probe["workload"]["connection"] == "new"
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "succeeded", run
    summary = run["summary"]
    assert summary["successes"] == REQUESTS
    assert summary["connection_reused_ratio"] == 0.0
    assert summary["connect_ms"]["count"] == REQUESTS
    assert summary["ttfb_ms"]["count"] == REQUESTS
    assert summary["dns_ms"] is None
    assert summary["tls_ms"] is None

    items = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()["items"]
    assert len(items) == REQUESTS
    for item in items:
        assert item["connection_reused"] is False
        assert item["connect_ms"] is not None
        assert item["ttfb_ms"] is not None
        assert item["connect_ms"] + item["ttfb_ms"] <= item["ttft_ms"]
        assert TRACE_ID.match(item["trace_id"])
    assert len({item["trace_id"] for item in items}) == REQUESTS
    rows = list(csv.DictReader(io.StringIO(
        (await api.get(f"/api/v1/runs/{run['id']}/samples", params={"format": "csv"})).text)))
    assert sorted(row["trace_id"] for row in rows) == sorted(i["trace_id"] for i in items)
    assert all(row["connection_reused"] == "false" and row["tls_ms"] == "" for row in rows)

    window = (await api.get(f"/api/v1/probes/{probe['id']}/summary",
                            params={"window": "1h"})).json()
    assert window["metrics"]["connect"]["count"] == REQUESTS
    assert window["metrics"]["ttfb"]["count"] == REQUESTS
    assert window["metrics"]["tls"]["count"] == 0
    series = (await api.get(f"/api/v1/probes/{probe['id']}/series",
                            params={"metric": "ttfb", "stat": "p50", "step": "1h"})).json()
    assert sum(point["count"] for point in series["points"]) == REQUESTS

    compared = (await api.get("/api/v1/compare", params={"probe": probe["name"],
                                                          "window": "1h"})).json()
    (row,) = compared["probes"]
    assert row["connect_ms"]["p50"] is not None
    assert row["ttfb_ms"]["p99"] is not None
    assert row["tls_ms"] is None
