"""The demo's first run at start: once the service answers, its probe runs now instead of at
the next tick, unless a run of it is already going (the scheduler's catch-up), a person
disabled it, or it is gone. Against the app with its real lifespan and scheduler on the test's
own PostgreSQL, and the simulator as a process of its own.

The probe's schedule is a daily cron two hours ahead, so the scheduler neither runs a tick
nor catches one up during the test (its catch-up runs only while at least half the period
remains): any run of it here is the one run_at_start asked for."""

from __future__ import annotations

import socket
import threading
from datetime import UTC, datetime, timedelta

import httpx

from sustain.service.demo.first_run import Outcome, run_at_start, wait_listening, wait_ready
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import create_endpoint, create_probe, wait_for_run
from tests.processes import free_port


def far_daily_cron() -> str:
    """A daily UTC schedule whose next tick is about two hours away."""
    at = datetime.now(UTC) + timedelta(hours=2)
    return f"{at.minute} {at.hour} * * *"


async def runs_of(api: httpx.AsyncClient, probe_id: int) -> list[dict[str, object]]:
    return list((await api.get("/api/v1/runs", params={"probe_id": probe_id})).json()["items"])


async def test_the_probe_runs_at_once_and_only_once(api: httpx.AsyncClient,
                                                    simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], cron=far_daily_cron(), interval_s=None,
                               profile={"kind": "constant", "rate": 2, "duration_s": 2})
    assert await wait_ready(api, 10, threading.Event())
    assert await runs_of(api, probe["id"]) == [], "the schedule ran nothing of its own"

    outcome, run_id = await run_at_start(api, probe["id"])
    assert outcome is Outcome.started
    assert await run_at_start(api, probe["id"]) == (Outcome.already_running, None), \
        "a run going is the first run: no second one"
    assert run_id is not None
    run = await wait_for_run(api, run_id)
    assert run["status"] == "succeeded", run
    assert run["trigger"] == "manual"
    assert [r["id"] for r in await runs_of(api, probe["id"])] == [run_id]


async def test_a_disabled_or_deleted_probe_is_left_alone(api: httpx.AsyncClient,
                                                         simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], cron=far_daily_cron(), interval_s=None,
                               enabled=False)
    assert await run_at_start(api, probe["id"]) == (Outcome.disabled, None)
    assert await runs_of(api, probe["id"]) == []
    assert (await api.delete(f"/api/v1/probes/{probe['id']}")).status_code == 204
    assert await run_at_start(api, probe["id"]) == (Outcome.missing, None)


async def test_waiting_for_the_service_ends_when_the_demo_stops() -> None:
    stopped = threading.Event()
    stopped.set()
    async with httpx.AsyncClient(base_url="http://127.0.0.1:9") as nothing:
        assert not await wait_ready(nothing, 60, stopped)
    assert not wait_listening("127.0.0.1", free_port(), 60, stopped)


def test_the_first_run_starts_once_the_port_listens() -> None:
    port = free_port()
    assert not wait_listening("127.0.0.1", port, 0.3, threading.Event()), "nothing listens"
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        assert wait_listening("127.0.0.1", port, 5, threading.Event())
