"""A run its service was stopped during says nothing of its endpoint: it is `interrupted` (not
`abandoned`, which stays for runs a dead replica lost), and the probe keeps the state of its
last finished run, on the status page's counts and in its row."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import text

from sustain.service.app import create_app, runtime_of
from sustain.service.db import status as status_queries
from sustain.service.db.engine import session_factory
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
    wait_for_run,
)


async def test_a_run_cut_by_the_services_stop_is_interrupted_and_the_probe_stays_ok(
        database_url: str, simulator: SimulatorHandle) -> None:
    app = create_app(app_settings(database_url, shutdown_grace_s=0.2))
    async with serving(app) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], enabled=False,
                                   profile={"kind": "constant", "rate": 5, "duration_s": 0.4})
        first = await wait_for_run(api, (await api.post(
            f"/api/v1/probes/{probe['id']}/runs")).json()["id"])
        assert first["status"] == "succeeded", first
        changed = await api.patch(f"/api/v1/probes/{probe['id']}", json={
            "profile": {"kind": "constant", "rate": 5, "duration_s": 60}})
        assert changed.status_code == 200, changed.text
        started = await api.post(f"/api/v1/probes/{probe['id']}/runs")
        assert started.status_code == 202, started.text
        long = started.json()["id"]
        for _ in range(100):
            if (await api.get(f"/api/v1/runs/{long}")).json()["status"] == "running":
                break
            await asyncio.sleep(0.05)
    # the app has stopped (its lifespan ended) with the 60 s run in flight
    restarted = create_app(app_settings(database_url, auto_migrate=False))
    async with serving(restarted) as api:
        run = (await api.get(f"/api/v1/runs/{long}")).json()
        assert run["status"] == "interrupted", run
        assert run["error"] == "service stopped during the run"
        engine = runtime_of(restarted).engine
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE probes SET enabled = true WHERE id = :p"),
                                     {"p": probe["id"]})
        async with session_factory(engine)() as session:
            counts = await status_queries.state_counts(session)
        assert counts.get("ok") == 1, counts
        assert not counts.get("degraded"), counts
        page = await api.get(f"/probes/{probe['id']}")
        assert page.status_code == 200
        assert "interrupted" in page.text


async def test_an_interrupted_run_is_a_status_the_runs_api_filters_by(
        api: httpx.AsyncClient) -> None:
    answer = await api.get("/api/v1/runs", params={"status": "interrupted"})
    assert answer.status_code == 200, answer.text
