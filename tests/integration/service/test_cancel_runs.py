"""Cancelling runs (SIGTERM must not be the only way to stop a run, and deleting its probe
must not answer 204 while it keeps sending): POST /api/v1/runs/{id}/cancel ends a run
within 2 s as `cancelled`, keeping its samples and a summary of them, on whichever replica
it executes; disabling or deleting a probe stops its run too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import create_app, runtime_of
from sustain.service.db import runs as run_queries
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    samples_of,
    serving,
    wait_for_run,
)

LONG = {"kind": "constant", "rate": 20, "duration_s": 60}
"""A run that would go on for a minute."""
CANCEL_GUARD_S = 15.0
"""How long a cancel may take to show before a test fails: only a guard against a cancel
that never lands (the run would go on for its minute). A cancel lands within about the
executor's 0.5 s poll (the service promises 2 s); benchmarks/cancel.py reports how long."""


async def within(timeout_s: float, check: Callable[[], Awaitable[bool]]) -> float:
    """Seconds until `check()` held; AssertionError after `timeout_s`."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"not within {timeout_s} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def status_of(api: httpx.AsyncClient, run_id: int) -> str:
    return str((await api.get(f"/api/v1/runs/{run_id}")).json()["status"])


async def a_long_run(api: httpx.AsyncClient, simulator: SimulatorHandle) -> int:
    """A manual run of LONG, once it has measured a few requests."""
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False, profile=LONG,
                               workload={"max_tokens": 4})
    run_id = int((await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"])

    async def measuring() -> bool:
        page = await api.get(f"/api/v1/runs/{run_id}/samples")
        return len(page.json()["items"]) >= 5

    await within(30, measuring)  # a hang guard: it measures within a second or so
    return run_id


async def test_a_running_run_is_cancelled_keeping_its_samples(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    run_id = await a_long_run(api, simulator)
    r = await api.post(f"/api/v1/runs/{run_id}/cancel")
    assert r.status_code == 202, r.text
    assert r.json()["cancel_requested_at"] is not None

    async def cancelled() -> bool:
        return await status_of(api, run_id) == "cancelled"

    await within(CANCEL_GUARD_S, cancelled)
    run = (await api.get(f"/api/v1/runs/{run_id}")).json()
    assert run["error"] == "cancelled on request"
    assert run["finished_at"] is not None
    summary = run["summary"]
    assert summary["stopped"] == "cancelled on request"
    assert 5 <= summary["attempts"] < 20 * 60
    assert summary["availability"] == 1.0
    samples = (await api.get(f"/api/v1/runs/{run_id}/samples",
                             params={"limit": 10_000})).json()
    assert len(samples["items"]) == summary["attempts"]
    assert samples["next_cursor"] is None, "the run is final"
    metrics = samples_of((await api.get("/metrics")).text)
    assert [v for labels, v in metrics["sustain_runs_total"]
            if labels["status"] == "cancelled"] == [1.0]


async def test_cancelling_a_finished_run_is_409_and_an_unknown_one_404(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False)
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    assert (await wait_for_run(api, run_id))["status"] == "succeeded"
    r = await api.post(f"/api/v1/runs/{run_id}/cancel")
    assert r.status_code == 409, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert "already succeeded" in r.json()["detail"]
    assert await status_of(api, run_id) == "succeeded"
    r = await api.post("/api/v1/runs/999999/cancel")
    assert (r.status_code, r.headers["content-type"]) == (404, "application/problem+json")


async def test_a_pending_run_is_cancelled_at_once_and_never_starts(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False)
    state = runtime_of(app)
    async with state.sessions.begin() as session:  # accepted, not yet handed to the executor
        run_id = (await run_queries.create_manual(session, probe["id"], "default")).id
    r = await api.post(f"/api/v1/runs/{run_id}/cancel")
    assert (r.status_code, r.json()["status"]) == (202, "cancelled")
    async with asyncio.timeout(30):  # what submit() runs in the background, awaited
        await state.executor.execute(run_id)
    run = (await api.get(f"/api/v1/runs/{run_id}")).json()
    assert (run["status"], run["started_at"], run["summary"]) == ("cancelled", None, None)
    assert (await api.post(f"/api/v1/runs/{run_id}/cancel")).status_code == 409


async def running_scheduled_run(api: httpx.AsyncClient, simulator: SimulatorHandle
                                ) -> tuple[int, int]:
    """An enabled probe ticking every second, and its first run, once it is measuring (a run
    is `running` from its claim; its worker process may still be starting then)."""
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], interval_s=1, profile=LONG,
                               workload={"max_tokens": 4})
    found: list[int] = []

    async def measuring() -> bool:
        items = (await api.get("/api/v1/runs", params={"probe_id": probe["id"],
                                                       "status": "running"})).json()["items"]
        found[:] = [r["id"] for r in items]
        if not found:
            return False
        page = await api.get(f"/api/v1/runs/{found[0]}/samples")
        return len(page.json()["items"]) >= 1

    await within(30, measuring)  # a hang guard: it measures within a second or so
    return int(probe["id"]), found[0]


async def test_disabling_a_probe_cancels_its_run(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    probe_id, run_id = await running_scheduled_run(api, simulator)
    r = await api.patch(f"/api/v1/probes/{probe_id}", json={"enabled": False})
    assert r.status_code == 200, r.text

    async def cancelled() -> bool:
        return await status_of(api, run_id) == "cancelled"

    await within(CANCEL_GUARD_S, cancelled)
    assert (await api.get(f"/api/v1/runs/{run_id}")).json()["summary"]["attempts"] > 0


async def test_deleting_a_probe_stops_its_run(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    probe_id, _ = await running_scheduled_run(api, simulator)
    executor = runtime_of(app).executor
    assert executor.in_flight == 1
    assert (await api.delete(f"/api/v1/probes/{probe_id}")).status_code == 204

    async def stopped() -> bool:
        return executor.in_flight == 0

    await within(CANCEL_GUARD_S, stopped)
    assert (await api.get("/api/v1/runs", params={"probe_id": probe_id})).json()["items"] == []


@pytest.fixture
async def other(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A second replica on the same database."""
    app = create_app(app_settings(database_url, auto_migrate=False, replica_id="replica-b"))
    async with serving(app) as client:
        yield app, client


async def test_a_run_is_cancelled_through_another_replica(
        api: httpx.AsyncClient, other: tuple[FastAPI, Any],
        simulator: SimulatorHandle) -> None:
    other_app, other_api = other
    run_id = await a_long_run(api, simulator)
    r = await other_api.post(f"/api/v1/runs/{run_id}/cancel")
    assert r.status_code == 202, r.text
    assert not runtime_of(other_app).executor.cancel(run_id), "it does not execute there"

    async def cancelled() -> bool:
        return await status_of(other_api, run_id) == "cancelled"

    await within(CANCEL_GUARD_S, cancelled)
    assert (await api.get(f"/api/v1/runs/{run_id}")).json()["summary"]["attempts"] >= 5


async def test_deleting_a_probe_through_another_replica_stops_its_run(
        api: httpx.AsyncClient, app: FastAPI, other: tuple[FastAPI, Any],
        simulator: SimulatorHandle) -> None:
    _, other_api = other
    run_id = await a_long_run(api, simulator)
    probe_id = (await api.get(f"/api/v1/runs/{run_id}")).json()["probe_id"]
    assert (await other_api.delete(f"/api/v1/probes/{probe_id}")).status_code == 204
    executor = runtime_of(app).executor

    async def stopped() -> bool:
        return executor.in_flight == 0

    await within(CANCEL_GUARD_S, stopped)
