"""/api/v1/probes: CRUD, validation, scheduler sync, and run-now end to end over loopback."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import runtime_of
from sustain.service.ticks.schedule import Every
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    create_endpoint,
    create_probe,
    samples_of,
    wait_for_run,
)


def scheduler_has_job(app: FastAPI, probe_id: int) -> bool:
    state = runtime_of(app)
    return state.scheduler.next_run_time(probe_id) is not None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"interval_s": -5}, "interval_s"),
        ({"interval_s": 0}, "interval_s"),
        ({"jitter_s": 120, "interval_s": 60}, "jitter_s"),
        ({"profile": {"kind": "constant", "rate": -1, "duration_s": 5}}, "profile.rate"),
        ({"profile": {"kind": "warp"}}, "profile"),
        ({"workload": {"max_tokens": 0}}, "workload.max_tokens"),
        ({"slo": {"ttft_ms": -3}}, "slo.ttft_ms"),
        ({"endpoint_id": 999999}, "endpoint_id"),
        ({"name": ""}, "name"),
    ],
)
async def test_bad_probe_field_answers_422_naming_it(
        api: httpx.AsyncClient, body: dict[str, object], field: str) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    full = {"name": "p", "endpoint_id": endpoint["id"], "interval_s": 60, **body}
    r = await api.post("/api/v1/probes", json=full)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert field in [e["field"] for e in r.json()["errors"]]
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_probe_crud_keeps_the_scheduler_in_step(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 2, "duration_s": 5},
                               slo={"ttft_ms": 200})
    assert probe["profile"]["rate"] == 2
    assert probe["slo"] == {"ttft_ms": 200, "tpot_ms": None, "ttfo_ms": None, "e2e_ms": None}
    assert probe["workload"]["stream"] is True
    assert not scheduler_has_job(app, probe["id"])

    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"enabled": True})
    assert r.status_code == 200
    assert scheduler_has_job(app, probe["id"])

    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"interval_s": 30})
    assert r.json()["interval_s"] == 30
    assert r.json()["profile"]["rate"] == 2
    state = runtime_of(app)
    assert state.scheduler.job_schedule(probe["id"]) == Every(30)

    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"jitter_s": 45})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "jitter_s"

    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"enabled": False})
    assert not scheduler_has_job(app, probe["id"])

    await api.patch(f"/api/v1/probes/{probe['id']}", json={"enabled": True})
    assert (await api.delete(f"/api/v1/probes/{probe['id']}")).status_code == 204
    assert not scheduler_has_job(app, probe["id"])
    assert (await api.get(f"/api/v1/probes/{probe['id']}")).status_code == 404


async def test_run_now_measures_the_simulator_and_stores_samples(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 10, "duration_s": 1})
    r = await api.post(f"/api/v1/probes/{probe['id']}/runs")
    assert r.status_code == 202
    accepted = r.json()
    assert accepted["href"] == f"/api/v1/runs/{accepted['id']}"
    run = await wait_for_run(api, accepted["id"])
    assert run["status"] == "succeeded", run
    assert run["trigger"] == "manual"
    summary = run["summary"]
    assert summary["attempts"] == 10
    assert summary["availability"] == 1.0
    assert summary["ttft_ms"]["count"] == 10
    assert summary["ttft_ms"]["p50"] >= 50.0, "the simulator's TTFT is 50 ms"
    assert "p99" in summary["ttft_ms"]["low_count"]

    runs = (await api.get("/api/v1/runs", params={"probe_id": probe["id"]})).json()["items"]
    assert [x["id"] for x in runs] == [accepted["id"]]
    none = (await api.get("/api/v1/runs", params={"status": "failed"})).json()["items"]
    assert none == []


@pytest.mark.parametrize("api_kind", ["openai-responses", "anthropic-messages"])
async def test_run_now_measures_every_generation_protocol_alike(
        api: httpx.AsyncClient, simulator: SimulatorHandle, api_kind: str) -> None:
    """The Responses and Anthropic Messages kinds store the figures chat stores: TTFT from
    their own events, server-counted tokens and the samples behind them."""
    endpoint = await create_endpoint(api, simulator.base_url, api_kind=api_kind)
    assert endpoint["api_kind"] == api_kind
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.5})
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "succeeded", run
    summary = run["summary"]
    assert summary["availability"] == 1.0
    assert summary["ttft_ms"]["count"] == summary["attempts"] == 5
    assert summary["ttft_ms"]["p50"] >= 50.0, "the simulator's TTFT is 50 ms"
    assert summary["output_tokens_estimated"] is False
    samples = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()["items"]
    assert len(samples) == 5
    assert all(sample["error_class"] is None for sample in samples)


@pytest.mark.parametrize(("api_kind", "workload", "items"), [
    ("openai-embeddings", {"batch_size": 3, "input_tokens": 8}, 3),
    ("rerank", {"documents": 4, "input_tokens": 8}, 4),
])
async def test_run_now_of_an_item_kind_stores_items_per_sample_and_per_second(
        api: httpx.AsyncClient, simulator: SimulatorHandle, api_kind: str,
        workload: dict[str, int], items: int) -> None:
    endpoint = await create_endpoint(api, simulator.base_url, api_kind=api_kind)
    probe = await create_probe(api, endpoint["id"], enabled=False, workload=workload,
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.5})
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "succeeded", run
    summary = run["summary"]
    assert summary["attempts"] == summary["successes"] == 5
    assert summary["items"] == 5 * items
    assert summary["items_per_second"] > 0
    assert summary["input_tokens"] > 0
    assert summary["ttft_ms"]["count"] == 0
    samples = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()["items"]
    assert [sample["items"] for sample in samples] == [items] * 5
    exported = samples_of((await api.get("/metrics")).text)
    assert [value for labels, value in exported["sustain_items_total"]
            if labels["probe"] == probe["name"]] == [5.0 * items]
    assert [value for labels, value in exported["sustain_probe_last_run_items_per_second"]
            if labels["probe"] == probe["name"]] == [pytest.approx(summary["items_per_second"])]
    window = (await api.get(f"/api/v1/probes/{probe['id']}/summary")).json()
    assert window["items"] == 5 * items
    assert window["items_per_second"] == pytest.approx(summary["items_per_second"])
    series = (await api.get(f"/api/v1/probes/{probe['id']}/series",
                            params={"stat": "item_throughput"})).json()
    assert series["unit"] == "items/s"
    assert [point["value"] for point in series["points"]] == \
        [pytest.approx(summary["items_per_second"])]
    assert f"{summary['item_throughput']:,.1f} items/s" in (await api.get("/")).text


async def test_run_now_of_transcriptions_stores_audio_and_the_real_time_factor(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url, api_kind="openai-transcriptions")
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               workload={"audio_s": 1.5},
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.3})
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "succeeded", run
    summary = run["summary"]
    assert summary["attempts"] == summary["successes"] == 3
    assert summary["audio_s"] == 4.5
    assert summary["rtf_ratio"]["count"] == 3
    assert summary["rtf_ratio"]["p50"] > 50.0 / 1000 / 1.5  # the simulator's TTFT, at least
    samples = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()["items"]
    assert [sample["audio_s"] for sample in samples] == [1.5] * 3
    rtf = (await api.get(f"/api/v1/probes/{probe['id']}/summary")).json()["metrics"]["rtf"]
    assert rtf["count"] == 3
    assert rtf["max"] == pytest.approx(summary["rtf_ratio"]["max"])
    exported = samples_of((await api.get("/metrics")).text)["sustain_probe_last_run_rtf_ratio"]
    assert {labels["quantile"]: value for labels, value in exported
            if labels["probe"] == probe["name"]} == {
        "0.5": pytest.approx(summary["rtf_ratio"]["p50"]),
        "0.99": pytest.approx(summary["rtf_ratio"]["p99"])}


async def test_run_of_unreachable_endpoint_fails_with_classified_samples(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1", timeout_connect_s=1)
    probe = await create_probe(api, endpoint["id"], enabled=False)
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    run = await wait_for_run(api, run_id)
    assert run["status"] == "failed"
    assert run["summary"]["errors"] == {"connect": 1}
    assert run["summary"]["availability"] == 0.0


async def test_run_with_missing_secret_fails_naming_the_reference(
        api: httpx.AsyncClient, simulator: SimulatorHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_ABSENT_KEY", raising=False)
    endpoint = await create_endpoint(api, simulator.base_url,
                                     auth_secret_ref="env:TEST_ABSENT_KEY")
    probe = await create_probe(api, endpoint["id"], enabled=False)
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    run = await wait_for_run(api, run_id)
    assert run["status"] == "failed"
    assert "env:TEST_ABSENT_KEY" in run["error"]


async def test_runs_query_parameters_are_validated(api: httpx.AsyncClient) -> None:
    for params in ({"limit": 0}, {"limit": 5000}, {"status": "exploded"}, {"probe_id": -1}):
        r = await api.get("/api/v1/runs", params=params)
        assert r.status_code == 422, params
        assert r.headers["content-type"] == "application/problem+json"
    assert (await api.get("/api/v1/runs/987654")).status_code == 404
    assert (await api.post("/api/v1/probes/987654/runs")).status_code == 404


async def test_duplicate_probe_name_is_409(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    await create_probe(api, endpoint["id"], enabled=False)
    r = await api.post("/api/v1/probes", json={
        "name": "p1", "endpoint_id": endpoint["id"], "interval_s": 60})
    assert r.status_code == 409
    assert "p1" in r.json()["detail"]
    other = await create_probe(api, endpoint["id"], name="p2", enabled=False)
    r = await api.patch(f"/api/v1/probes/{other['id']}", json={"name": "p1"})
    assert r.status_code == 409


async def test_a_failing_write_keeps_the_samples_and_the_run_finishes_when_it_works_again(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 5, "duration_s": 1})
    state = runtime_of(app)
    async with state.engine.begin() as connection:
        await connection.execute(text("ALTER TABLE samples RENAME TO samples_unavailable"))
    try:
        run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
        for _ in range(200):
            if state.writer.last_error is not None:
                break
            await asyncio.sleep(0.05)
        assert state.writer.last_error is not None
        ready = await api.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["writer"].startswith("retrying")
        assert (await api.get(f"/api/v1/runs/{run_id}")).json()["status"] == "running"
    finally:
        async with state.engine.begin() as connection:
            await connection.execute(text("ALTER TABLE samples_unavailable RENAME TO samples"))
    run = await wait_for_run(api, run_id)
    assert run["status"] == "succeeded"
    async with state.engine.connect() as connection:
        stored = (await connection.execute(text(
            "SELECT count(*), count(DISTINCT seq) FROM samples WHERE run_id = :id"),
            {"id": run_id})).one()
    assert tuple(stored) == (run["summary"]["attempts"],) * 2
    assert (await api.get("/readyz")).status_code == 200


async def test_run_now_while_a_run_of_the_probe_is_going_answers_409(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 4, "duration_s": 1.5})
    first = await api.post(f"/api/v1/probes/{probe['id']}/runs")
    assert first.status_code == 202
    second = await api.post(f"/api/v1/probes/{probe['id']}/runs")
    assert second.status_code == 409
    assert "in progress" in second.json()["detail"]
    assert (await wait_for_run(api, first.json()["id"]))["status"] == "succeeded"
    third = await api.post(f"/api/v1/probes/{probe['id']}/runs")
    assert third.status_code == 202
    await wait_for_run(api, third.json()["id"])
