"""Capacity probes and deployments over REST: a capacity run's result is stored
and served as a series and a gauge, the endpoint's deployment prices the run, and a search
beyond the load limits is refused naming its field."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import create_endpoint, create_probe, samples_of
from tests.integration.service.test_reach import app_with, refused, run_now

SEARCH = {"kind": "capacity", "slo": {"ttft_ms": 5000}, "minimum": 1, "maximum": 2,
          "duration_s": 0.5}


async def test_a_capacity_run_is_stored_priced_and_exported(
        database_url: str, simulator: SimulatorHandle) -> None:
    async with app_with(database_url) as api:
        endpoint = await create_endpoint(api, simulator.base_url, deployment={
            "accelerator": "H100-80GB", "accelerators": 2, "price_per_hour": 8.0})
        assert endpoint["deployment"]["accelerators"] == 2
        probe = await create_probe(api, endpoint["id"], enabled=False, profile=SEARCH)
        run = await run_now(api, probe["id"])
        assert run["status"] == "succeeded", run
        capacity = run["summary"]["capacity"]
        assert (capacity["max_passing"], capacity["first_failing"]) == (2, None)
        tps = run["summary"]["output_tokens_per_second"]
        efficiency = run["summary"]["efficiency"]
        assert efficiency["output_tps_per_accelerator"] == tps / 2
        assert efficiency["output_tps_per_kw"] is None
        series = (await api.get(f"/api/v1/probes/{probe['id']}/capacity")).json()["points"]
        assert [(p["run_id"], p["capacity"]) for p in series] == [(run["id"], 2)]
        metrics = samples_of((await api.get("/metrics")).text)
        assert [v for _, v in metrics["sustain_capacity_concurrency"]] == [2.0]
        at_capacity = next(p["system_tps"] for p in capacity["points"] if p["level"] == 2)
        assert [v for _, v in metrics["sustain_capacity_output_tokens_per_second"]] == [
            pytest.approx(at_capacity)]
        assert [v for _, v in metrics[
            "sustain_probe_last_run_output_tokens_per_second_per_accelerator"]] == [
            pytest.approx(tps / 2)]
        ((priced, per_token),) = metrics["sustain_probe_last_run_cost_per_output_token"]
        assert priced["currency"] == "USD"  # the deployment names none: its default
        assert per_token == pytest.approx(
            efficiency["cost_per_million_output_tokens"] / 1e6)
        window = (await api.get(f"/api/v1/probes/{probe['id']}/summary",
                                params={"window": "1d"})).json()
        assert window["efficiency"]["output_tps_per_accelerator"] == pytest.approx(
            window["output_tokens_per_second"] / 2)
        assert window["efficiency"]["currency"] == "USD"
        page = await api.get(f"/runs/{run['id']}")
        assert page.status_code == 200
        assert "Capacity under SLO: 2 (first failing: -)" in page.text
        assert page.text.count("<circle") == 2  # one point per level measured
        assert (await api.get("/runs/999999")).status_code == 404
        status = (await api.get("/")).text
        assert "capacity under SLO: 2 users" in status
        assert "per million good tokens" not in status  # the probe sets no SLO thresholds


async def test_a_search_beyond_the_limits_and_a_bad_deployment_are_refused(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    message = refused(await api.post("/api/v1/probes", json={
        "name": "huge", "endpoint_id": endpoint["id"], "interval_s": 60,
        "profile": {**SEARCH, "maximum": 5000}}), "profile.maximum")
    assert "SUSTAIN_MAX_CONCURRENCY" in message
    long = refused(await api.post("/api/v1/probes", json={
        "name": "long", "endpoint_id": endpoint["id"], "interval_s": 60,
        "profile": {**SEARCH, "maximum": 1024, "duration_s": 600}}), "profile.duration_s")
    assert "levels x (warmup_s + duration_s)" in long
    refused(await api.patch(f"/api/v1/endpoints/{endpoint['id']}", json={
        "deployment": {"accelerators": 0}}), "deployment.accelerators")
    refused(await api.patch(f"/api/v1/endpoints/{endpoint['id']}", json={
        "deployment": {"currency": "dollars"}}), "deployment.currency")
