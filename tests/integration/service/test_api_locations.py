"""Locations over REST: a probe lists where it runs from (validated, replaced whole by a
PATCH, counted once per location against the total rate); runs carry their location and
filter by it; series, summaries, capacity and compare keep one location's runs or split
them side by side; last-run gauges are per location."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import runtime_of
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    create_endpoint,
    create_probe,
    samples_of,
    wait_for_run,
)
from tests.integration.service.storage import create_probe_rows, seed_run, synthetic_samples

END = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)


async def test_a_probe_lists_its_locations(api: httpx.AsyncClient,
                                           simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    plain = await create_probe(api, endpoint["id"], name="plain", enabled=False)
    assert plain["locations"] == ["default"]
    probe = await create_probe(api, endpoint["id"], name="far", enabled=False,
                               locations=["eu-west-1", "us-east-1"])
    assert probe["locations"] == ["eu-west-1", "us-east-1"]
    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"locations": ["ap-south-1"]})
    assert r.status_code == 200, r.text
    assert r.json()["locations"] == ["ap-south-1"]


@pytest.mark.parametrize(("locations", "problem"), [
    ([], "at least 1"),
    (["EU_West"], "not a location name"),
    (["-edge"], "not a location name"),
    (["a" * 64], "at most 63"),
    (["eu", "eu"], "listed once"),
    ([f"l{i}" for i in range(17)], "at most 16"),
])
async def test_a_bad_location_list_is_refused_naming_the_field(
        api: httpx.AsyncClient, simulator: SimulatorHandle, locations: list[str],
        problem: str) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    r = await api.post("/api/v1/probes", json={
        "name": "p", "endpoint_id": endpoint["id"], "interval_s": 60,
        "locations": locations})
    assert r.status_code == 422, r.text
    assert "locations" in r.text
    assert problem in r.text
    assert (await api.get("/api/v1/probes")).json()["items"] == [], "nothing written"


async def test_each_location_counts_against_the_total_rate(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    runtime_of(app).settings.max_total_rate = 25.0
    endpoint = await create_endpoint(api, simulator.base_url)
    profile = {"kind": "constant", "rate": 10, "duration_s": 1}
    await create_probe(api, endpoint["id"], name="two", profile=profile,
                       locations=["a", "b"])
    r = await api.post("/api/v1/probes", json={
        "name": "three", "endpoint_id": endpoint["id"], "interval_s": 60, "profile": profile,
        "locations": ["a"]})
    assert r.status_code == 409, "20 + 10 requests/s is beyond 25"
    assert "SUSTAIN_MAX_TOTAL_RATE" in r.text


async def test_a_run_now_measures_from_the_replica_s_location(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.3})
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    run = await wait_for_run(api, run_id)
    assert run["location"] == "default"
    listed = (await api.get("/api/v1/runs", params={"location": "default"})).json()["items"]
    assert [r["id"] for r in listed] == [run_id]
    assert (await api.get("/api/v1/runs", params={"location": "elsewhere"})
            ).json()["items"] == []
    r = await api.get("/api/v1/runs", params={"location": "Not A Location"})
    assert r.status_code == 422
    assert "location" in r.text


async def seed_two_locations(app: FastAPI) -> int:
    """Six hourly runs in each of two locations; `far` is twice as slow."""
    engine = runtime_of(app).engine
    probe_id = await create_probe_rows(engine, "split")
    rng = random.Random(7)
    for hour in range(6):
        at = END - timedelta(hours=6 - hour)
        await seed_run(engine, probe_id, at, synthetic_samples(50, at, rng), location="near")
        await seed_run(engine, probe_id, at, synthetic_samples(50, at, rng, ttft_scale=2.0),
                       location="far")
    return probe_id


async def test_series_and_summaries_keep_one_location_or_all(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    probe_id = await seed_two_locations(app)
    window = {"from": (END - timedelta(days=1)).isoformat(), "to": END.isoformat(),
              "step": "1h", "metric": "ttft", "stat": "p50"}
    near = (await api.get(f"/api/v1/probes/{probe_id}/series",
                          params={**window, "location": "near"})).json()
    far = (await api.get(f"/api/v1/probes/{probe_id}/series",
                         params={**window, "location": "far"})).json()
    both = (await api.get(f"/api/v1/probes/{probe_id}/series", params=window)).json()
    assert (near["location"], far["location"], both["location"]) == ("near", "far", None)
    assert [p["count"] for p in near["points"]] == [50] * 6
    assert [p["count"] for p in both["points"]] == [100] * 6
    for a, b in zip(near["points"], far["points"], strict=True):
        assert b["value"] == pytest.approx(2 * a["value"], rel=0.15)

    summary = {"window": "1d", "to": END.isoformat()}
    whole = (await api.get(f"/api/v1/probes/{probe_id}/summary", params=summary)).json()
    one = (await api.get(f"/api/v1/probes/{probe_id}/summary",
                         params={**summary, "location": "far"})).json()
    assert (whole["runs"], one["runs"]) == (12, 6)
    assert one["location"] == "far"
    assert one["metrics"]["ttft"]["p50"] > whole["metrics"]["ttft"]["p50"]


async def test_compare_splits_a_probe_by_location(api: httpx.AsyncClient,
                                                  app: FastAPI) -> None:
    await seed_two_locations(app)
    params = {"probe": ["split"], "window": "1d", "to": END.isoformat()}
    r = await api.get("/api/v1/compare", params={**params, "by": "location"})
    assert r.status_code == 200, r.text
    rows = {row["location"]: row for row in r.json()["probes"]}
    assert set(rows) == {"default", "far", "near"}, "listed, and those that ran"
    assert rows["default"]["runs"] == 0
    assert rows["near"]["runs"] == rows["far"]["runs"] == 6
    assert rows["far"]["ttft_ms"]["p50"] == pytest.approx(
        2 * rows["near"]["ttft_ms"]["p50"], rel=0.15)
    (together,) = (await api.get("/api/v1/compare", params=params)).json()["probes"]
    assert (together["location"], together["runs"]) == (None, 12)
    (far,) = (await api.get("/api/v1/compare", params={**params, "location": "far"})
              ).json()["probes"]
    assert far["ttft_ms"] == rows["far"]["ttft_ms"]
    r = await api.get("/api/v1/compare", params={**params, "by": "location",
                                                 "location": "far"})
    assert r.status_code == 422
    assert "query.by" in r.text


async def test_last_run_gauges_are_per_location(api: httpx.AsyncClient,
                                                app: FastAPI) -> None:
    await seed_two_locations(app)
    metrics = samples_of((await api.get("/metrics")).text)
    places = sorted(labels["location"] for labels, _ in
                    metrics["sustain_probe_last_run_timestamp_seconds"])
    assert places == ["far", "near"]


async def test_drift_compares_one_location_s_runs(api: httpx.AsyncClient,
                                                  app: FastAPI) -> None:
    """A location's drift report compares that location's runs only."""
    probe_id = await seed_two_locations(app)
    params = {"metric": "ttft", "stat": "p50", "window": "3h", "baseline": "3h",
              "to": END.isoformat()}
    far = (await api.get(f"/api/v1/probes/{probe_id}/drift",
                         params={**params, "location": "far"})).json()
    assert far["location"] == "far"
    assert far["recent"]["runs"] == far["baseline"]["runs"] == 3
    whole = (await api.get(f"/api/v1/probes/{probe_id}/drift", params=params)).json()
    assert whole["location"] is None
    assert whole["recent"]["runs"] == whole["baseline"]["runs"] == 6
