"""Load limits on every profile (`{"kind": "constant", "rate": 10000, "duration_s": 86400}`
must not be accepted): REST create and update answer 422 naming each field beyond a limit and
store nothing; a stored profile that lowered limits no longer allow fails its runs, naming
the fields."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import create_app, runtime_of
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
    wait_for_run,
)


def fields_of(r: httpx.Response) -> list[str]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    return [e["field"] for e in r.json()["errors"]]


@pytest.mark.parametrize(("profile", "fields"), [
    ({"kind": "constant", "rate": 10_000, "duration_s": 86_400},
     ["profile.rate", "profile.duration_s", "profile.duration_s"]),
    ({"kind": "poisson", "rate": 500, "duration_s": 3000, "warmup_s": 700},
     ["profile.duration_s", "profile.duration_s"]),
    ({"kind": "concurrency", "users": 5000, "max_requests": 10}, ["profile.users"]),
    ({"kind": "concurrency", "users": 5, "max_requests": 2_000_000}, ["profile.max_requests"]),
    ({"kind": "steps", "stages": [{"rate": 5, "duration_s": 1},
                                  {"concurrency": 2001, "duration_s": 1}]},
     ["profile.stages.1.concurrency"]),
    ({"kind": "sweep", "levels": [1, 10, 3000], "duration_s": 60}, ["profile.levels"]),
    ({"kind": "sweep", "levels": [1, 2, 4], "duration_s": 1200, "warmup_s": 10},
     ["profile.duration_s"]),
])
async def test_a_profile_beyond_the_limits_is_422_naming_each_field(
        api: httpx.AsyncClient, profile: dict[str, Any], fields: list[str]) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={"name": "p", "endpoint_id": endpoint["id"],
                                               "interval_s": 3600, "profile": profile})
    assert fields_of(r) == fields
    assert "SUSTAIN_MAX_" in r.json()["detail"]
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_a_profile_at_the_limits_is_accepted(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    await create_probe(api, endpoint["id"], profile={
        "kind": "constant", "rate": 1000, "duration_s": 1000, "max_in_flight": 2000})


async def test_a_patch_beyond_the_limits_is_refused_and_changes_nothing(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    probe = await create_probe(api, endpoint["id"])
    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={
        "profile": {"kind": "steps", "stages": [{"rate": 1001, "duration_s": 1}]}})
    assert fields_of(r) == ["profile.stages.0.rate"]
    assert (await api.get(f"/api/v1/probes/{probe['id']}")).json()["profile"] == \
        probe["profile"]


async def test_limits_come_from_the_settings(database_url: str) -> None:
    app = create_app(app_settings(database_url, auto_migrate=False, max_rate=5,
                                  max_run_s=30))
    async with serving(app) as api:
        endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
        r = await api.post("/api/v1/probes", json={
            "name": "p", "endpoint_id": endpoint["id"], "interval_s": 3600,
            "profile": {"kind": "constant", "rate": 6, "duration_s": 31}})
        assert fields_of(r) == ["profile.rate", "profile.duration_s"]
        assert r.json()["errors"][0]["message"] == \
            "6 requests/s; at most 5 (SUSTAIN_MAX_RATE)"


async def test_a_stored_profile_beyond_lowered_limits_fails_its_runs_naming_the_field(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False)  # no tick run in the way
    async with runtime_of(app).engine.begin() as connection:  # as if the limit was lowered
        await connection.execute(text(
            "UPDATE probes SET profile = CAST(:p AS jsonb) WHERE id = :id"),
            {"p": '{"kind": "concurrency", "users": 2500, "max_requests": 5}',
             "id": probe["id"]})
    accepted = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()
    run = await wait_for_run(api, accepted["id"])
    assert run["status"] == "failed"
    assert run["error"] == (
        "the profile is beyond this service's limits: profile.users: users is 2,500; at most "
        "2,000 (SUSTAIN_MAX_CONCURRENCY)")
    samples = (await api.get(f"/api/v1/runs/{accepted['id']}/samples")).json()
    assert samples["items"] == [], "nothing was sent"
