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
    probe = await create_probe(api, endpoint["id"], interval_s=2)
    deadline = asyncio.get_running_loop().time() + 60  # a hang guard: ~2 s are needed
    runs: list[dict[str, Any]] = []
    while asyncio.get_running_loop().time() < deadline:
        runs = (await api.get("/api/v1/runs", params={"probe_id": probe["id"]})).json()["items"]
        if len([r for r in runs if r["status"] == "succeeded"]) >= 2:
            break
        await asyncio.sleep(0.2)
    finished = [r for r in runs if r["status"] == "succeeded"]
    assert len(finished) >= 2, runs
    assert all(r["trigger"] == "schedule" for r in runs)
    # every run is a tick of the 2 s interval, and no tick has two runs (under load a tick
    # may find the previous run still going: it is recorded `skipped`, on the same grid)
    ticks = sorted(datetime.fromisoformat(str(r["scheduled_for"])) for r in runs)
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert all(gap > timedelta(0) and gap % timedelta(seconds=2) == timedelta(0)
               for gap in gaps), ticks
    for run in finished:
        # never before its tick (how soon after: benchmarks/scheduler.py)
        started = datetime.fromisoformat(str(run["started_at"]))
        assert started >= datetime.fromisoformat(str(run["scheduled_for"]))


async def test_a_second_scheduler_on_the_same_database_never_runs_a_tick_twice(
        api: httpx.AsyncClient, database_url: str,
        simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    other = create_app(app_settings(database_url, auto_migrate=False,
                                replica_id="replica-b"))
    async with other.router.lifespan_context(other):
        probe = await create_probe(api, endpoint["id"], interval_s=1)
        await runtime_of(other).scheduler.refresh(probe["id"])

        async def ticks_so_far() -> int:
            listed = (await api.get("/api/v1/runs", params={"probe_id": probe["id"],
                                                            "limit": 100})).json()["items"]
            return len(listed)

        async with asyncio.timeout(60):  # both schedulers run until 4 ticks are recorded
            while await ticks_so_far() < 4:  # noqa: ASYNC110 - the database's state
                await asyncio.sleep(0.2)
    runs = (await api.get("/api/v1/runs", params={"probe_id": probe["id"], "limit": 100})
            ).json()["items"]
    for run in runs:
        if run["status"] in ("pending", "running"):
            await wait_for_run(api, int(run["id"]))
    ticks = sorted(datetime.fromisoformat(str(r["scheduled_for"])) for r in runs)
    assert len(ticks) >= 3
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(ticks))
