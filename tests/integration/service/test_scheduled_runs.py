"""Scheduled ticks become runs: one per tick, even when two schedulers share a database."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime, timedelta
from typing import Any

import httpx

from sustain.service.app import create_app, runtime_of
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    wait_for_run,
)


async def test_new_probe_runs_its_current_tick_then_every_interval(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], interval_seconds=2)
    deadline = asyncio.get_running_loop().time() + 15
    runs: list[dict[str, Any]] = []
    while asyncio.get_running_loop().time() < deadline:
        runs = (await api.get("/api/v1/runs", params={"probe_id": probe["id"]})).json()["items"]
        if len([r for r in runs if r["status"] == "succeeded"]) >= 2:
            break
        await asyncio.sleep(0.2)
    finished = sorted((r for r in runs if r["status"] == "succeeded"), key=lambda r: r["id"])
    assert len(finished) >= 2, runs
    assert all(r["trigger"] == "schedule" for r in finished)
    ticks = [datetime.fromisoformat(str(r["scheduled_for"])) for r in finished]
    assert all(b - a == timedelta(seconds=2) for a, b in itertools.pairwise(ticks))
    for run in finished[1:]:
        started = datetime.fromisoformat(str(run["started_at"]))
        assert timedelta(0) <= started - datetime.fromisoformat(str(run["scheduled_for"])) \
            < timedelta(seconds=1)


async def test_a_second_scheduler_on_the_same_database_never_runs_a_tick_twice(
        api: httpx.AsyncClient, database_url: str,
        simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    other = create_app(app_settings(database_url, auto_migrate=False,
                                replica_id="replica-b"))
    async with other.router.lifespan_context(other):
        probe = await create_probe(api, endpoint["id"], interval_seconds=1)
        await runtime_of(other).scheduler.refresh(probe["id"])
        await asyncio.sleep(4.5)
    runs = (await api.get("/api/v1/runs", params={"probe_id": probe["id"], "limit": 100})
            ).json()["items"]
    for run in runs:
        if run["status"] in ("pending", "running"):
            await wait_for_run(api, int(run["id"]))
    ticks = sorted(datetime.fromisoformat(str(r["scheduled_for"])) for r in runs)
    assert len(ticks) >= 3
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(ticks))
