"""A reasoning endpoint through the service: a probe with a goodput threshold on TTFO runs
against a simulator that thinks first; its run's summary, its samples (JSON and CSV), the
probe's window, Prometheus and an SLO on `ttfo` all carry the first answer output and the
reasoning tokens."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import httpx
import pytest

from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.integration.service.helpers import (
    create_endpoint,
    create_probe,
    samples_of,
    wait_for_run,
)

REASONING = 8
TOKENS = 4


@pytest.fixture(scope="module")
def thinking_sim() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=5, itl_ms=1, output_tokens=TOKENS,
                                             reasoning_tokens=REASONING)) as sim:
        yield sim


async def test_a_thinking_endpoints_run_stores_ttfo_and_reasoning_everywhere_it_is_read(
        api: httpx.AsyncClient, thinking_sim: BackgroundSimulator) -> None:
    endpoint = await create_endpoint(api, thinking_sim.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               workload={"reasoning_effort": "high", "input_tokens": 8},
                               slo={"ttfo_ms": 60_000},
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.5})
    assert probe["slo"]["ttfo_ms"] == 60_000
    assert probe["workload"]["reasoning_effort"] == "high"
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "succeeded", run
    summary = run["summary"]
    assert summary["successes"] == 5
    assert summary["good"] == 5
    assert summary["reasoning_tokens"] == 5 * REASONING
    assert summary["answer_tokens"] == 5 * TOKENS
    assert summary["reasoning_share"] == pytest.approx(REASONING / (REASONING + TOKENS))
    assert summary["ttfo_ms"]["count"] == 5

    page = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()
    for item in page["items"]:
        assert item["reasoning_tokens"] == REASONING
        assert item["reasoning_server_counted"] is True
        assert item["ttfo_ms"] >= item["ttft_ms"]
    rows = list(csv.DictReader(io.StringIO(
        (await api.get(f"/api/v1/runs/{run['id']}/samples", params={"format": "csv"})).text)))
    assert [row["reasoning_tokens"] for row in rows] == [str(REASONING)] * 5

    window = (await api.get(f"/api/v1/probes/{probe['id']}/summary",
                            params={"window": "1h"})).json()
    assert window["metrics"]["ttfo"]["count"] == 5
    assert window["metrics"]["reasoning_share"]["count"] == 5

    metrics = samples_of((await api.get("/metrics")).text)
    assert sum(value for labels, value in metrics["sustain_reasoning_tokens_total"]
               if labels["probe"] == probe["name"]) == 5 * REASONING
    assert any(labels["probe"] == probe["name"]
               for labels, _ in metrics["sustain_ttfo_seconds_count"])

    slo = await api.post("/api/v1/slos", json={
        "name": "first-answer", "probes": [probe["name"]], "objective": 0.99, "window": "7d",
        "sli": {"kind": "latency", "metric": "ttfo", "threshold_ms": 60_000}})
    assert slo.status_code == 201, slo.text
