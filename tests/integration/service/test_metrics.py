"""/metrics after a run: request counters, latency histograms and last-run gauges."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    create_endpoint,
    create_probe,
    samples_of,
    wait_for_run,
)


async def test_metrics_expose_counters_histograms_and_last_run_gauges(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.5})
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    run = await wait_for_run(api, run_id)
    assert run["status"] == "succeeded"

    r = await api.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    metrics = samples_of(r.text)
    series = {"endpoint": "sim", "probe": "p1", "model": "sim-model", "location": "default"}
    assert ({**series, "outcome": "success", "error_class": "none"}, 5.0) in \
        metrics["sustain_requests_total"]
    assert (series, 5.0) in metrics["sustain_ttft_seconds_count"]
    assert (series, 5.0) in metrics["sustain_e2e_seconds_count"]
    assert (series, 160.0) in metrics["sustain_output_tokens_total"]
    buckets = {labels["le"]: v for labels, v in metrics["sustain_ttft_seconds_bucket"]}
    assert buckets["+Inf"] == 5.0
    # The simulator's TTFT is 50 ms, which noise can only lengthen: no request in the
    # buckets below it, every one in some bucket.
    assert all(v == 0.0 for le, v in buckets.items() if le != "+Inf" and float(le) < 0.05)
    counts = [buckets[le] for le in sorted(buckets, key=float)]
    assert counts == sorted(counts), "cumulative buckets"
    (labels, stamp), = metrics["sustain_probe_last_run_timestamp_seconds"]
    assert labels == series
    assert stamp > 1.7e9
    assert (series, 1.0) in metrics["sustain_probe_last_run_success"]
    assert (series, 1.0) in metrics["sustain_probe_last_run_availability_ratio"]
    ttft_p50 = [v for labels, v in metrics["sustain_probe_last_run_ttft_seconds"]
                if labels["quantile"] == "0.5"]
    assert ttft_p50 == [pytest.approx(run["summary"]["ttft_ms"]["p50"] / 1000.0)]
    assert ttft_p50[0] >= 0.05


async def test_failed_requests_are_counted_by_error_class(
        api: httpx.AsyncClient, simulator: SimulatorHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_TOKEN", "sk-top-secret-token")
    endpoint = await create_endpoint(api, simulator.base_url,
                                     auth_secret_ref="env:TEST_TOKEN",
                                     headers={"x-sim-fault": "http_500"})
    probe = await create_probe(api, endpoint["id"], enabled=False)
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    run = await wait_for_run(api, run_id)
    assert run["status"] == "failed"
    text = (await api.get("/metrics")).text
    assert "sk-top-secret-token" not in text
    assert 'error_class="http_5xx"' in text
    assert "sk-top-secret-token" not in (await api.get(f"/api/v1/runs/{run_id}")).text
    assert "sk-top-secret-token" not in (await api.get("/api/v1/endpoints")).text



async def test_write_path_metrics_count_what_reached_the_database(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 20, "duration_s": 0.5})
    began = time.monotonic()
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    assert (await wait_for_run(api, run_id))["status"] == "succeeded"

    metrics = samples_of((await api.get("/metrics")).text)
    elapsed = time.monotonic() - began
    assert metrics["sustain_samples_written_total"] == [({}, 10.0)]
    assert metrics["sustain_buffer_samples"] == [({}, 0.0)]
    assert metrics["sustain_buffer_capacity_samples"][0][1] > 0
    assert metrics["sustain_samples_dropped_total"] == [({}, 0.0)]
    assert metrics["sustain_write_failures_total"] == [({}, 0.0)]
    ((_, batches),) = metrics["sustain_db_write_seconds_count"]
    ((_, seconds),) = metrics["sustain_db_write_seconds_sum"]
    assert batches >= 1
    # In seconds, and spent within the run (the writer writes one batch at a time), however
    # long that took on this machine.
    assert 0 < seconds <= elapsed
