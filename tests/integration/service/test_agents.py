"""Agents over real HTTP on loopback: an agent key acts only for its location; an agent runs
its location's ticks through the API, each once, beside the replicas; its runs survive an
outage of the service in its spool and arrive afterwards, each once; an upload sent again,
or in parts, is stored once; and a malformed upload is a 422 naming the field."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgpack
import pytest
import uvicorn
from fastapi import FastAPI

from sustain.probes.client.clients import HttpClients
from sustain.probes.runner import InProcess
from sustain.service.agent.agent import Agent
from sustain.service.agent.client import ServiceClient
from sustain.service.agent.spool import Spool, SpooledRun
from sustain.service.app import create_app, runtime_of
from sustain.service.db import partitions
from sustain.service.db import samples as sample_rows
from sustain.service.runs.rows import sample_tuple, sent_at
from sustain.service.runs.upload import MAX_PART_SAMPLES, encode_final, encode_samples
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
)
from tests.integration.service.storage import fetch, final_of, synthetic_samples
from tests.tcp_proxy import CuttableProxy

LOCATION = "edge-1"


@contextlib.asynccontextmanager
async def listening(app: FastAPI) -> AsyncIterator[int]:
    """The app served by uvicorn on a loopback port (its lifespan running); the port."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None,
                                           lifespan="on"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(30):  # hang guard
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.05)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def agent_key(api: httpx.AsyncClient, location: str = LOCATION) -> str:
    r = await api.post("/api/v1/keys", json={"name": f"agent-{location}", "role": "agent",
                                             "location": location})
    assert r.status_code == 201, r.text
    return str(r.json()["key"])


def fast_app(database_url: str, heartbeat_s: float = 0.5) -> FastAPI:
    """Heartbeats every `heartbeat_s` (an agent silent for three is dead to the service) and
    a reconcile every second, so missed ticks are recorded within seconds."""
    return create_app(app_settings(database_url, auto_migrate=False, heartbeat_s=heartbeat_s,
                                   reconcile_s=1, misfire_grace_s=1))


def new_agent(port: int, key: str, spool: Path, name: str = "a1",
              heartbeat_s: float = 0.5) -> Agent:
    return Agent(ServiceClient(f"http://127.0.0.1:{port}", key, name, timeout_s=2.0),
                 InProcess(HttpClients(50)), Spool(spool, 64 * 1024 * 1024),
                 location=LOCATION, heartbeat_s=heartbeat_s)


async def test_an_agent_key_names_its_location_and_acts_only_for_it(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    for body in ({"name": "g", "role": "agent"},
                 {"name": "g", "role": "viewer", "location": LOCATION},
                 {"name": "g", "role": "agent", "location": "Not Valid"}):
        r = await api.post("/api/v1/keys", json=body)
        assert r.status_code == 422, r.text
        assert "location" in r.text
    key = await agent_key(api)
    headers = {"Authorization": f"Bearer {key}"}
    endpoint = await create_endpoint(api, simulator.base_url)
    mine = await create_probe(api, endpoint["id"], name="mine", interval_s=10,
                              locations=[LOCATION, "x"])
    other = await create_probe(api, endpoint["id"], name="other", interval_s=10,
                               locations=["x"])

    listed = await api.get("/api/v1/agent/assignments", headers=headers)
    assert listed.status_code == 200, listed.text
    assert [a["probe"]["id"] for a in listed.json()["probes"]] == [mine["id"]]
    assert listed.json()["probes"][0]["endpoint"]["base_url"] == simulator.base_url
    now = datetime.now(UTC).timestamp()
    tick = datetime.fromtimestamp(now - now % 10 - 30, UTC)
    r = await api.post("/api/v1/agent/claims", headers=headers, json={
        "agent": "a1", "probe_id": other["id"], "tick": tick.isoformat()})
    assert r.status_code == 404, "a probe of another location is not this agent's"
    r = await api.post("/api/v1/agent/claims", headers=headers, json={
        "agent": "a1", "probe_id": mine["id"],
        "tick": (tick + timedelta(seconds=1)).isoformat()})
    assert r.status_code == 422
    assert "not a tick" in r.text
    r = await api.post("/api/v1/agent/claims", headers=headers, json={
        "agent": "a1", "probe_id": mine["id"], "tick": tick.isoformat()})
    assert r.json() == {"status": "running", "run_id": r.json()["run_id"]}
    again = await api.post("/api/v1/agent/claims", headers=headers, json={
        "agent": "a2", "probe_id": mine["id"], "tick": tick.isoformat()})
    assert again.json()["status"] == "taken"
    run = (await api.get(f"/api/v1/runs/{r.json()['run_id']}")).json()
    assert (run["location"], run["claimed_by"]) == (LOCATION, "agent:agent-edge-1:a1")

    beat = await api.post("/api/v1/agent/heartbeat", headers=headers, json={
        "agent": "a1", "in_flight": 1, "running": [run["id"]], "spooled_runs": 3,
        "clock_offset_ms": 12.5})
    assert beat.status_code == 200, beat.text
    assert beat.json()["agent_id"] == "agent:agent-edge-1:a1"
    replicas = (await api.get("/api/v1/replicas")).json()
    assert any(r["id"] == "agent:agent-edge-1:a1" for r in replicas["items"]), replicas
    for path in ("/api/v1/probes", "/api/v1/runs", "/api/v1/keys", "/"):
        assert (await api.get(path, headers={**headers, "cookie": ""})).status_code in \
            (401, 403, 303), path


async def test_an_agent_runs_its_location_s_ticks_through_the_api(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    app = fast_app(database_url)
    async with serving(app) as api, listening(app) as port:
        key = await agent_key(api)
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], interval_s=1, locations=[LOCATION],
                                   profile={"kind": "constant", "rate": 20, "duration_s": 0.2})
        agent = new_agent(port, key, tmp_path / "spool")
        await agent.start()
        try:
            async with asyncio.timeout(60):  # hang guard; the condition is what is waited for
                while len(await succeeded(api, probe["id"])) < 3:  # noqa: ASYNC110
                    await asyncio.sleep(0.2)
        finally:
            await agent.stop()
        runs = await succeeded(api, probe["id"])
        assert {r["claimed_by"] for r in runs} == {"agent:agent-edge-1:a1"}
        assert {r["location"] for r in runs} == {LOCATION}
        for run in runs:
            assert run["summary"]["attempts"] == 4
            samples = await fetch(runtime_of(app).engine,
                                  "SELECT count(*) FROM samples WHERE run_id = :r", r=run["id"])
            assert samples == [(4,)]
        ticks = [r["scheduled_for"] for r in runs]
        assert len(ticks) == len(set(ticks)), "each tick once"


async def succeeded(api: httpx.AsyncClient, probe_id: int) -> list[dict[str, Any]]:
    items = (await api.get("/api/v1/runs", params={"probe_id": probe_id, "limit": 200})
             ).json()["items"]
    return [r for r in items if r["status"] == "succeeded"]


OUTAGE_INTERVAL_S = 2
"""The outage test's probe interval. A tick may start at most half an interval late (1 s
here) before the service records it missed, and a run (~0.3 s) leaves most of the interval
free: a busy machine's delays neither miss a tick nor make a run overlap the next."""


async def test_runs_measured_through_an_outage_arrive_afterwards_each_once(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    app = fast_app(database_url, heartbeat_s=1.0)
    async with serving(app) as api, listening(app) as port:
        key = await agent_key(api)
        endpoint = await create_endpoint(api, simulator.base_url)
        # Four requests of 4 tokens each (~90 ms from the simulator, not its 32 in ~370 ms).
        probe = await create_probe(api, endpoint["id"], interval_s=OUTAGE_INTERVAL_S,
                                   locations=[LOCATION], workload={"max_tokens": 4},
                                   profile={"kind": "constant", "rate": 20, "duration_s": 0.2})
        proxy = CuttableProxy(port)
        await proxy.start()
        agent = new_agent(proxy.port, key, tmp_path / "spool", heartbeat_s=1.0)
        await agent.start()
        try:
            async with asyncio.timeout(60):
                while len(await succeeded(api, probe["id"])) < 2:  # noqa: ASYNC110
                    await asyncio.sleep(0.2)
            proxy.set_cut(True)
            async with asyncio.timeout(60):
                while agent.spool.runs < 4:  # noqa: ASYNC110 - offline runs wait on disk
                    await asyncio.sleep(0.2)
            # Until the service has recorded a tick of the silent location missed (seconds
            # after the agent's heartbeats stop, so usually already; the timeout only guards
            # against a hang).
            async with asyncio.timeout(60):
                while not (missed := await fetch(  # noqa: ASYNC110
                        runtime_of(app).engine,
                        "SELECT count(*) FROM runs WHERE status = 'missed'"))[0][0]:
                    await asyncio.sleep(0.2)
            proxy.set_cut(False)
            reconnected = datetime.now(UTC)
            async with asyncio.timeout(60):
                while agent.spool.runs:  # noqa: ASYNC110
                    await asyncio.sleep(0.2)
            # Two ticks after the link came back run online, so the outage lies between
            # measured ticks.
            async with asyncio.timeout(60):
                while len([r for r in await succeeded(api, probe["id"])  # noqa: ASYNC110
                           if datetime.fromisoformat(r["scheduled_for"]) > reconnected]) < 2:
                    await asyncio.sleep(0.2)
        finally:
            await agent.stop()
            await proxy.close()
        rows = await fetch(runtime_of(app).engine,
                           "SELECT scheduled_for, status, trigger FROM runs "
                           "WHERE probe_id = :p ORDER BY scheduled_for, id", p=probe["id"])
    assert missed[0][0] >= 1, "the service saw the location go quiet"
    assert not [r for r in rows if r[2] == "partition"], "nothing measured twice"
    ticks = [r[0] for r in rows if r[2] == "schedule"]
    assert len(ticks) == len(set(ticks)), "one run per tick in the location"
    measured = [r for r in rows if r[1] == "succeeded"]
    first, last = measured[0][0], measured[-1][0]
    between = [r for r in rows if first <= r[0] <= last]
    assert [r[1] for r in between] == ["succeeded"] * len(between), \
        "every tick from the first to the last ran, the outage's too (taken over from missed)"
    assert len(between) >= 8
    assert [t.timestamp() for t, *_ in between] == [
        first.timestamp() + k * OUTAGE_INTERVAL_S for k in range(len(between))], "no tick lost"


def recent_tick(hours_ago: int = 1) -> datetime:
    """A tick of a probe every 60 s, `hours_ago` hours ago: an upload of a tick off the
    schedule, in the future or older than SUSTAIN_AGENT_UPLOAD_MAX_AGE_S is refused."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(hours=hours_ago)


def spooled(probe_id: int, tick: datetime, samples: int, run_id: int | None = None
            ) -> SpooledRun:
    rng = random.Random(samples)
    measured = synthetic_samples(samples, tick, rng)
    final = final_of(run_id or 0, probe_id, tick, measured)
    return SpooledRun(upload_id=uuid.uuid4(), probe_id=probe_id, tick=tick.timestamp(),
                      run_id=run_id, started_at=tick.timestamp(), dropped=0,
                      samples=encode_samples(measured), final=encode_final(final))


async def test_an_upload_sent_again_or_in_parts_is_stored_once(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    key = await agent_key(api)
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False, interval_s=60,
                               locations=[LOCATION])
    tick = recent_tick()
    run = spooled(probe["id"], tick, MAX_PART_SAMPLES + 7)
    async with listening(app) as port:
        client = ServiceClient(f"http://127.0.0.1:{port}", key, "a1")
        first = await client.upload(run)
        again = await client.upload(run)
        await client.aclose()
    assert first.outcome == "stored"
    assert again.outcome == "duplicate"
    assert again.run_id == first.run_id
    engine = runtime_of(app).engine
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(MAX_PART_SAMPLES + 7,)]
    assert await fetch(engine, "SELECT count(*) FROM agent_upload_parts") == [(0,)]
    stored = (await api.get(f"/api/v1/runs/{first.run_id}")).json()
    assert stored["status"] == "succeeded"
    assert stored["location"] == LOCATION
    assert stored["summary"]["attempts"] == MAX_PART_SAMPLES + 7


@pytest.mark.parametrize("marked", ["running", "abandoned"])
async def test_a_claim_whose_answer_was_lost_receives_the_tick_measured_offline(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle, marked: str) -> None:
    """The claim was committed but its answer never reached the agent, so the agent measured
    the tick offline and uploads it without a run id: the claim's empty run (still running,
    or since marked abandoned when the agent's heartbeat went quiet) is that tick's run."""
    key = await agent_key(api)
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], interval_s=60, locations=[LOCATION])
    tick = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    engine = runtime_of(app).engine
    async with listening(app) as port:
        client = ServiceClient(f"http://127.0.0.1:{port}", key, "a1")
        claimed = await client.claim(probe["id"], tick, [])
        assert claimed.status == "running"
        if marked == "abandoned":
            await fetch(engine, "UPDATE runs SET status = 'abandoned', finished_at = now() "
                        "WHERE id = :r RETURNING id", r=claimed.run_id)
        stored = await client.upload(spooled(probe["id"], tick, 12))
        await client.aclose()
    assert stored.outcome == "stored"
    assert stored.run_id == claimed.run_id
    assert await fetch(engine, "SELECT status, trigger FROM runs WHERE probe_id = :p",
                       p=probe["id"]) == [("succeeded", "schedule")]
    assert await fetch(engine, "SELECT count(*) FROM samples WHERE run_id = :r",
                       r=claimed.run_id) == [(12,)]


async def test_a_claim_that_holds_samples_or_another_agent_s_is_not_taken_over(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    """Another agent's claim of the tick, or this agent's claim that already holds samples of
    another measurement, keeps the tick: the offline upload is a partition, nothing kept."""
    key = await agent_key(api)
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], interval_s=60, locations=[LOCATION])
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    other_tick, full_tick = now - timedelta(minutes=30), now - timedelta(minutes=31)
    engine = runtime_of(app).engine
    async with listening(app) as port:
        a1 = ServiceClient(f"http://127.0.0.1:{port}", key, "a1")
        a2 = ServiceClient(f"http://127.0.0.1:{port}", key, "a2")
        other = await a2.claim(probe["id"], other_tick, [])
        assert other.status == "running"
        assert other.run_id is not None
        full = await a1.claim(probe["id"], full_tick, [other.run_id])  # not busy: it ended
        assert full.status == "running"
        assert full.run_id is not None
        rows = [sample_tuple(full.run_id, 0, probe["id"], sample)
                for sample in synthetic_samples(1, full_tick, random.Random(1))]
        async with engine.begin() as connection:  # a measurement already streaming into it
            await partitions.ensure(connection, {partitions.utc_day(sent_at(rows[0]))})
            await sample_rows.insert(connection, rows)
        answers = [await a1.upload(spooled(probe["id"], tick, 5))
                   for tick in (other_tick, full_tick)]
        await a1.aclose()
        await a2.aclose()
    assert [a.outcome for a in answers] == ["partition", "partition"]
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(1,)]
    assert await fetch(engine, "SELECT status FROM runs WHERE probe_id = :p ORDER BY id",
                       p=probe["id"]) == [("running",), ("running",)]


async def test_the_last_part_before_the_others_waits_for_them(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    key = await agent_key(api)
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False, interval_s=60,
                               locations=[LOCATION])
    run = spooled(probe["id"], recent_tick(), 10)
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/msgpack"}
    common = {"upload_id": str(run.upload_id), "parts": 2, "probe_id": run.probe_id,
              "tick": run.tick, "run_id": None, "started_at": run.started_at, "dropped": 0}
    last = msgpack.packb({**common, "part": 1, "samples": run.samples[5:],
                          "final": run.final})
    r = await api.post("/api/v1/agent/uploads", params={"agent": "a1"}, content=last,
                       headers=headers)
    assert r.json()["outcome"] == "part"
    assert r.json()["missing"] == [0]
    first = msgpack.packb({**common, "part": 0, "samples": run.samples[:5], "final": None})
    assert (await api.post("/api/v1/agent/uploads", params={"agent": "a1"}, content=first,
                           headers=headers)).json()["outcome"] == "part"
    r = await api.post("/api/v1/agent/uploads", params={"agent": "a1"}, content=last,
                       headers=headers)
    assert r.json()["outcome"] == "stored"
    assert await fetch(runtime_of(app).engine, "SELECT count(*) FROM samples") == [(10,)]


@pytest.mark.parametrize(("change", "field"), [
    ({"samples": [[1, 2, 3, 1.8e9]]}, "body.samples[0]"),
    ({"tick": "yesterday"}, "body.tick"),
    ({"upload_id": "nope"}, "body.upload_id"),
    ({"final": {"status": "succeeded", "counts": {"attempts": -1}}},
     "body.final.counts.attempts"),
    ({"final": {"status": "partying"}}, "body.final.status"),
    ({"final": {"status": "succeeded", "sketches": [[0, "ttft", b"junk"]]}},
     "body.final.sketches[0].sketch"),
])
async def test_a_malformed_upload_is_refused_naming_the_field(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle,
        change: dict[str, Any], field: str) -> None:
    key = await agent_key(api)
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False, interval_s=60,
                               locations=[LOCATION])
    run = spooled(probe["id"], recent_tick(), 3)
    body = {"upload_id": str(run.upload_id), "part": 0, "parts": 1, "probe_id": run.probe_id,
            "tick": run.tick, "run_id": None, "started_at": run.started_at, "dropped": 0,
            "samples": run.samples, "final": run.final, **change}
    r = await api.post("/api/v1/agent/uploads", params={"agent": "a1"},
                       content=msgpack.packb(body, use_bin_type=True),
                       headers={"Authorization": f"Bearer {key}",
                                "content-type": "application/msgpack"})
    assert r.status_code == 422, r.text
    assert field in {e["field"] for e in r.json()["errors"]}, r.text
    engine = runtime_of(app).engine
    assert await fetch(engine, "SELECT count(*) FROM runs") == [(0,)], "nothing written"
    assert await fetch(engine, "SELECT count(*) FROM agent_upload_parts") == [(0,)]




def part_body(run: SpooledRun, number: int, parts: int) -> bytes:
    """Part `number` of `parts` of the run, its samples split evenly."""
    size = -(-len(run.samples) // parts)
    return bytes(msgpack.packb({
        "upload_id": str(run.upload_id), "part": number, "parts": parts,
        "probe_id": run.probe_id, "tick": run.tick, "run_id": None,
        "started_at": run.started_at, "dropped": 0,
        "samples": run.samples[number * size:(number + 1) * size],
        "final": run.final if number == parts - 1 else None}, use_bin_type=True))


async def test_an_agent_restarted_mid_upload_finishes_it_under_its_new_name(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    key = await agent_key(api)
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False, interval_s=60,
                               locations=[LOCATION])
    run = spooled(probe["id"], recent_tick(), 10)
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/msgpack"}

    async def send(agent: str, number: int) -> dict[str, Any]:
        r = await api.post("/api/v1/agent/uploads", params={"agent": agent},
                           content=part_body(run, number, 2), headers=headers)
        assert r.status_code == 200, r.text
        return dict(r.json())

    assert (await send("a1-100", 0))["outcome"] == "part"  # then a1-100 dies
    assert (await send("a1-200", 0))["outcome"] == "part"  # its successor sends it all again
    done = await send("a1-200", 1)
    assert done["outcome"] == "stored", done
    assert await fetch(runtime_of(app).engine, "SELECT count(*) FROM samples") == [(10,)]


async def test_an_agent_key_can_leave_only_so_many_bytes_waiting(
        database_url: str, simulator: SimulatorHandle) -> None:
    app = create_app(app_settings(database_url, auto_migrate=False,
                                  agent_upload_max_bytes=1024 * 1024))
    async with serving(app) as api:
        key = await agent_key(api)
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], enabled=False, interval_s=60,
                                   locations=[LOCATION])
        headers = {"Authorization": f"Bearer {key}", "content-type": "application/msgpack"}
        answers, sizes = [], []
        for hour in range(3):  # first parts of three uploads, never finished
            run = spooled(probe["id"], recent_tick(hours_ago=hour + 1), 5000)
            body = part_body(run, 0, 2)  # about 360 KB each: the third crosses 1 MiB
            sizes.append(len(body))
            answers.append(await api.post("/api/v1/agent/uploads", params={"agent": "a1"},
                                          content=body, headers=headers))
        assert sum(sizes[:2]) <= 1024 * 1024 < sum(sizes), sizes
        assert [r.status_code for r in answers] == [200, 200, 409]
        assert "unfinished uploads" in answers[2].text
        assert await fetch(runtime_of(app).engine,
                           "SELECT count(*) FROM agent_upload_parts") == [(2,)]
