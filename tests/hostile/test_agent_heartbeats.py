"""Agent keys that heartbeat as many names, and the lists an agent reads: a key holds at most
SUSTAIN_AGENT_MAX_NAMES live names (one more is a 409, and its rows never grow past that);
agents never push the service's replicas back in the claim order, whose wait is capped; the
heartbeat learns the assignments' version from one query without building them; the
assignments and a run's server metrics come a page at a time; and a key's name has no `:`,
so no key counts another's agents."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.access.keys import Role
from sustain.service.agent.client import ServiceClient
from sustain.service.app import create_app, runtime_of
from sustain.service.cli.keys import key_problems
from sustain.service.db import agents as agent_queries
from sustain.service.db import keys as key_queries
from sustain.service.db.engine import session_factory
from sustain.service.scheduling.claims import preferred
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
)
from tests.integration.service.storage import fetch
from tests.integration.service.test_agents import listening
from tests.processes import ADMIN_HEADERS

LOCATION = "edge-1"
MAX_NAMES = 32
"""SUSTAIN_AGENT_MAX_NAMES's default."""
FAKE_NAMES = 200
"""Enough to be far past the cap (the review used 1,000; each one more is refused alike)."""


async def agent_key(api: httpx.AsyncClient, name: str = "fleet",
                    location: str = LOCATION) -> dict[str, str]:
    r = await api.post("/api/v1/keys", json={"name": name, "role": "agent",
                                             "location": location})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


async def beat(api: httpx.AsyncClient, headers: dict[str, str], name: str) -> httpx.Response:
    return await api.post("/api/v1/agent/heartbeat", headers=headers, json={
        "agent": name, "in_flight": 0, "spooled_runs": 0})


async def rows_of(engine: AsyncEngine, prefix: str) -> list[str]:
    return [r[0] for r in await fetch(
        engine, "SELECT id FROM replicas WHERE starts_with(id, :p) ORDER BY id", p=prefix)]


async def test_a_key_beating_as_hundreds_of_names_holds_at_most_agent_max_names(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    headers = await agent_key(api)
    for i in range(MAX_NAMES):
        assert (r := await beat(api, headers, f"n{i}")).status_code == 200, r.text
    refused = await beat(api, headers, f"n{MAX_NAMES}")
    assert refused.status_code == 409, refused.text
    assert "SUSTAIN_AGENT_MAX_NAMES" in refused.text
    gate = asyncio.Semaphore(16)

    async def fake(name: str) -> int:
        async with gate:
            return (await beat(api, headers, name)).status_code

    statuses = await asyncio.gather(*(fake(f"n{i}") for i in range(MAX_NAMES + 1, FAKE_NAMES)))
    assert set(statuses) == {409}
    assert len(await rows_of(engine, "agent:fleet:")) == MAX_NAMES

    assert (await beat(api, headers, "n0")).status_code == 200, "a live name beats on"
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE replicas SET heartbeat_at = now() - interval '1 hour' "
            "WHERE id IN ('agent:fleet:n1', 'agent:fleet:n2')"))
    assert (await beat(api, headers, "new")).status_code == 200, "it takes a stale one's place"
    rows = await rows_of(engine, "agent:fleet:")
    assert len(rows) == MAX_NAMES - 1
    assert "agent:fleet:new" in rows
    assert "agent:fleet:n1" not in rows
    assert "agent:fleet:n2" not in rows
    assert (await beat(api, headers, "newer")).status_code == 200
    assert (await beat(api, headers, "newest")).status_code == 409


async def test_agents_never_push_the_replicas_back_in_the_claim_order(
        app: FastAPI, engine: AsyncEngine) -> None:
    async with serving(app) as api:
        replica = runtime_of(app)
        settings = replica.settings
        headers = await agent_key(api, location=settings.location)
        for i in range(MAX_NAMES):
            assert (await beat(api, headers, f"n{i}")).status_code == 200
        async with engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO replicas (id, location, heartbeat_at) "
                "VALUES ('other-replica', :l, now())"), {"l": settings.location})
        await replica.liveness.beat()
        assert replica.peers.others == {"other-replica": 0}, "agents claim without waiting"
        assert len(replica.peers.known) == MAX_NAMES + 1, "agents still own ticks offline"
        first = [p for p in range(50) if preferred(p, datetime(2025, 1, 1, tzinfo=UTC),
                                                   replica.replica_id, replica.peers.others)]
        assert 0 < len(first) < 50, "the replica shares the first claims with its peer only"


async def test_the_heartbeat_reads_the_assignments_version_without_building_them(
        api: httpx.AsyncClient, simulator: SimulatorHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    headers = await agent_key(api)
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], locations=[LOCATION])
    built: list[str] = []

    async def assigned(*_: Any, **__: Any) -> Any:
        built.append("assigned")
        raise AssertionError("the heartbeat builds no assignment")

    async def version() -> str:
        r = await beat(api, headers, "a1")
        assert r.status_code == 200, r.text
        return str(r.json()["assignments_version"])

    with monkeypatch.context() as patched:
        patched.setattr(agent_queries, "assigned", assigned)
        first = await version()
        assert await version() == first, "nothing changed"
        r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"interval_s": 1800})
        assert r.status_code == 200, r.text
        second = await version()
        assert second != first, "a probe of the location changed"
        r = await api.patch(f"/api/v1/endpoints/{endpoint['id']}", json={"timeout_total_s": 50})
        assert r.status_code == 200, r.text
        third = await version()
        assert third not in (first, second), "its endpoint changed"
        other = await create_probe(api, endpoint["id"], name="p2", locations=["x"])
        assert await version() == third, "a probe of another location is not an assignment"
        r = await api.patch(f"/api/v1/probes/{other['id']}", json={"locations": ["x", LOCATION]})
        assert r.status_code == 200, r.text
        fourth = await version()
        assert fourth != third, "a probe joined the location"
        r = await api.patch(f"/api/v1/probes/{other['id']}", json={"enabled": False})
        assert r.status_code == 200, r.text
        assert await version() == third, "a probe left it: the assignments are as before"
    assert built == []
    listed = (await api.get("/api/v1/agent/assignments", headers=headers)).json()
    assert listed["version"] == await version()


@pytest.fixture
async def small_pages(database_url: str) -> AsyncIterator[tuple[FastAPI, int]]:
    """The app with pages of 2 by default (at most 3), served on a loopback port."""
    app = create_app(app_settings(database_url, auto_migrate=False, page_size=2,
                                  max_page_size=3))
    async with listening(app) as port:
        yield app, port


async def test_the_assignments_come_a_page_at_a_time_and_the_agent_reads_them_all(
        small_pages: tuple[FastAPI, int], simulator: SimulatorHandle) -> None:
    _, port = small_pages
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                 headers=ADMIN_HEADERS) as api:
        headers = await agent_key(api)
        endpoint = await create_endpoint(api, simulator.base_url)
        ids = [(await create_probe(api, endpoint["id"], name=f"p{i}",
                                   locations=[LOCATION]))["id"] for i in range(7)]
        await create_probe(api, endpoint["id"], name="elsewhere", locations=["x"])

        too_many = await api.get("/api/v1/agent/assignments?limit=4", headers=headers)
        assert too_many.status_code == 422
        assert "query.limit" in too_many.text
        seen: list[int] = []
        versions = set()
        following: str | None = None
        pages = 0
        while True:
            params = {} if following is None else {"cursor": following}
            page = (await api.get("/api/v1/agent/assignments", headers=headers,
                                  params=params)).json()
            assert len(page["probes"]) <= 2
            seen += [a["probe"]["id"] for a in page["probes"]]
            versions.add(page["version"])
            pages += 1
            following = page["next_cursor"]
            if following is None:
                break
        assert (seen, pages) == (ids, 4)
        assert len(versions) == 1
        beat_version = (await beat(api, headers, "a1")).json()["assignments_version"]
        assert versions == {beat_version}

        bad = await api.get("/api/v1/agent/assignments", headers=headers,
                            params={"cursor": "bm90LW91cnM6MQ"})
        assert bad.status_code == 422
        assert "query.cursor" in bad.text

        key = headers["Authorization"].removeprefix("Bearer ")
        client = ServiceClient(f"http://127.0.0.1:{port}", key, "a1", timeout_s=5.0)
        try:
            every = await client.assignments()
        finally:
            await client.aclose()
        assert [a.probe.id for a in every.probes] == ids
        assert every.version == beat_version
        assert every.next_cursor is None


async def test_a_runs_server_metrics_come_a_page_at_a_time(
        api: httpx.AsyncClient, engine: AsyncEngine, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False)
    async with engine.begin() as connection:
        run_id = (await connection.execute(text(
            "INSERT INTO runs (probe_id, trigger, scheduled_for, status) "
            "VALUES (:p, 'manual', now(), 'succeeded') RETURNING id"),
            {"p": probe["id"]})).scalar_one()
        await connection.execute(text(
            "INSERT INTO run_server_series (run_id, name, at, value) "
            "SELECT :r, 's' || lpad(i::text, 3, '0'), ARRAY[now()], ARRAY[i::float8] "
            "FROM generate_series(1, 250) AS i"), {"r": run_id})
    names: list[str] = []
    following: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 100}
        if following is not None:
            params["cursor"] = following
        r = await api.get(f"/api/v1/runs/{run_id}/server-metrics", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["series"]) <= 100
        names += [s["name"] for s in page["series"]]
        following = page["next_cursor"]
        if following is None:
            break
    assert names == [f"s{i:03d}" for i in range(1, 251)]
    default = (await api.get(f"/api/v1/runs/{run_id}/server-metrics")).json()
    assert len(default["series"]) == 100
    assert default["next_cursor"] is not None
    r = await api.get(f"/api/v1/runs/{run_id}/server-metrics", params={"limit": 100_000})
    assert r.status_code == 422
    assert "query.limit" in r.text


async def test_a_key_name_with_a_colon_is_refused_naming_name(api: httpx.AsyncClient) -> None:
    for role, location in (("agent", LOCATION), ("viewer", None)):
        r = await api.post("/api/v1/keys", json={"name": "a:b", "role": role,
                                                 "location": location})
        assert r.status_code == 422, r.text
        assert [p["field"] for p in r.json()["errors"]] == ["name"]
    problems = key_problems("a:b", "agent", LOCATION)
    assert len(problems) == 1
    assert problems[0].startswith("--name:")


async def test_an_old_key_with_a_colon_is_not_counted_under_its_prefix(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    async with session_factory(engine)() as session:
        old = await key_queries.create(session, "a:b", Role.agent, "test", LOCATION)
        await session.commit()
    prefixed = {"Authorization": f"Bearer {old.key}"}
    plain = await agent_key(api, name="a")
    for i in range(MAX_NAMES):
        assert (await beat(api, prefixed, f"n{i}")).status_code == 200
    for i in range(MAX_NAMES):
        r = await beat(api, plain, f"m{i}")
        assert r.status_code == 200, f"key a counted key a:b's agents: {r.text}"
    assert (await beat(api, plain, "one-more")).status_code == 409
    assert (await beat(api, prefixed, "one-more")).status_code == 409
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE replicas SET heartbeat_at = now() - interval '1 hour' "
            "WHERE id = 'agent:a:m0'"))
    assert (await beat(api, plain, "fresh")).status_code == 200
    assert len(await rows_of(engine, "agent:a:b:")) == MAX_NAMES, \
        "key a forgot only its own stale names"
