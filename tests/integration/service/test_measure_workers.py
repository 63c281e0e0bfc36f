"""Runs of the service measure in worker processes: a run of `workers: 2` counts
what one worker counts, and its stored percentiles are the percentiles over all its stored
samples; a profile asking for more workers than the replica has is refused at once."""

from __future__ import annotations

import os

import httpx
from fastapi import FastAPI

from sustain.probes.measure.percentiles import distribution
from sustain.probes.workers.pool import WorkerPool
from sustain.service.app import runtime_of
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import create_endpoint, create_probe, wait_for_run


async def run_once(api: httpx.AsyncClient, endpoint_id: int, name: str,
                   profile: dict[str, object]) -> dict[str, object]:
    probe = await create_probe(api, endpoint_id, name=name, enabled=False, profile=profile,
                               workload={"max_tokens": 4})
    run_id = int((await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"])
    run = await wait_for_run(api, run_id)
    assert run["status"] == "succeeded", run
    return run


async def test_two_workers_count_what_one_counts_with_percentiles_over_all_samples(
        app: FastAPI, api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    profile = {"kind": "concurrency", "users": 4, "max_requests": 41}
    one = await run_once(api, endpoint["id"], "one-worker", {**profile, "workers": 1})
    two = await run_once(api, endpoint["id"], "two-workers", {**profile, "workers": 2})
    summary = two["summary"]
    assert isinstance(summary, dict)
    assert isinstance(one["summary"], dict)
    assert summary["attempts"] == one["summary"]["attempts"] == 41
    page = (await api.get(f"/api/v1/runs/{two['id']}/samples",
                          params={"limit": 1000})).json()
    samples = page["items"]
    assert len(samples) == 41
    assert len({s["seq"] for s in samples}) == 41
    ttft = distribution([s["ttft_ms"] for s in samples if s["ttft_ms"] is not None])
    e2e = distribution([s["e2e_ms"] for s in samples])
    for quantile in ("p50", "p90", "p99"):
        assert summary["ttft_ms"][quantile] == getattr(ttft, quantile)
        assert summary["e2e_ms"][quantile] == getattr(e2e, quantile)
    # cache-honest by default: the simulator caches prefixes, the salt defeats it,
    # and what it reported crossed the worker pipe into storage
    assert {s["cached_tokens"] for s in samples} == {0}
    assert summary["cache_hit_ratio"] == 0.0
    measurer = runtime_of(app).measurer
    assert isinstance(measurer, WorkerPool)
    assert len(measurer.pids) == 2
    assert os.getpid() not in measurer.pids


async def test_a_profile_asking_for_more_workers_than_the_replica_has_is_refused(
        app: FastAPI, api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    has = runtime_of(app).measurer.capacity
    r = await api.post("/api/v1/probes", json={
        "name": "too-wide", "endpoint_id": endpoint["id"], "interval_s": 60,
        "profile": {"kind": "constant", "rate": 1, "duration_s": 1, "workers": has + 1}})
    assert r.status_code == 422, r.text
    assert "profile.workers" in r.text
    assert "SUSTAIN_MEASURE_WORKERS" in r.text
