"""How many objects, and how much planned load, the service holds (an editor once created
1,000 endpoints with 64 headers of 4 KB each): a create beyond SUSTAIN_MAX_ENDPOINTS,
_PROBES, _SLOS or _NOTIFIERS, or a probe that would take the enabled probes past
SUSTAIN_MAX_TOTAL_RATE, is a 409 naming the setting, and stores nothing; concurrent creates
do not overshoot; a config file beyond a limit is refused whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import create_app, runtime_of
from sustain.service.config_file.load import parse
from sustain.service.config_file.sync import sync
from sustain.service.config_file.yaml_lines import ConfigError
from tests.integration.service.helpers import app_settings, create_endpoint, serving

LIMITS = {"max_endpoints": 3, "max_probes": 2, "max_slos": 1, "max_notifiers": 1,
          "max_rate": 100.0, "max_total_rate": 150.0}


@pytest.fixture
def app(database_url: str) -> FastAPI:
    return create_app(app_settings(database_url, auto_migrate=False, **LIMITS))


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as client:
        yield client


def conflict(r: httpx.Response, detail: str) -> None:
    assert r.status_code == 409, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert detail in r.json()["detail"]


async def count(app: FastAPI, table: str) -> int:
    async with runtime_of(app).engine.connect() as connection:
        return int((await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def probe(api: httpx.AsyncClient, endpoint_id: int, name: str, profile: dict[str, Any],
                **fields: Any) -> httpx.Response:
    return await api.post("/api/v1/probes", json={
        "name": name, "endpoint_id": endpoint_id, "interval_s": 3600,
        "profile": profile, **fields})


def constant(rate: float) -> dict[str, Any]:
    return {"kind": "constant", "rate": rate, "duration_s": 1}


async def test_creating_more_endpoints_than_the_limit_is_409_naming_it(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    ids = [(await create_endpoint(api, "http://127.0.0.1:9/v1", name=f"e{i}"))["id"]
           for i in range(3)]
    r = await api.post("/api/v1/endpoints", json={
        "name": "e3", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
    conflict(r, "at most 3 endpoints (SUSTAIN_MAX_ENDPOINTS)")
    assert await count(app, "endpoints") == 3
    assert (await api.delete(f"/api/v1/endpoints/{ids[0]}")).status_code == 204
    await create_endpoint(api, "http://127.0.0.1:9/v1", name="e3")


async def test_concurrent_creates_do_not_overshoot_the_limit(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    answers = await asyncio.gather(*(api.post("/api/v1/endpoints", json={
        "name": f"e{i}", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
        for i in range(12)))
    assert sorted(r.status_code for r in answers) == [201] * 3 + [409] * 9
    assert await count(app, "endpoints") == 3


async def test_probes_slos_and_notifiers_are_limited_too(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    for name in ("p1", "p2"):
        assert (await probe(api, endpoint["id"], name, {"kind": "single"})).status_code == 201
    conflict(await probe(api, endpoint["id"], "p3", {"kind": "single"}),
             "at most 2 probes (SUSTAIN_MAX_PROBES)")
    slo = {"probes": ["p1"], "objective": 0.99, "window": "7d",
           "sli": {"kind": "availability"}}
    assert (await api.post("/api/v1/slos", json={"name": "s1", **slo})).status_code == 201
    conflict(await api.post("/api/v1/slos", json={"name": "s2", **slo}),
             "at most 1 slos (SUSTAIN_MAX_SLOS)")
    hook = {"kind": "webhook", "url": "http://127.0.0.1:1/h", "timeout_s": 1}
    assert (await api.post("/api/v1/notifiers", json={"name": "n1", **hook})).status_code == 201
    conflict(await api.post("/api/v1/notifiers", json={"name": "n2", **hook}),
             "at most 1 notifiers (SUSTAIN_MAX_NOTIFIERS)")
    assert [await count(app, t) for t in ("probes", "slos", "notifiers")] == [2, 1, 1]


async def test_enabled_probes_may_not_plan_more_than_the_total_rate(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    endpoint = (await create_endpoint(api, "http://127.0.0.1:9/v1"))["id"]
    fast = (await probe(api, endpoint, "fast", constant(100))).json()
    conflict(await probe(api, endpoint, "more", constant(60)), "SUSTAIN_MAX_TOTAL_RATE")
    assert await count(app, "probes") == 1
    # Disabled, it plans nothing; enabling it is what would exceed the total.
    more = await probe(api, endpoint, "more", constant(60), enabled=False)
    assert more.status_code == 201, more.text
    conflict(await api.patch(f"/api/v1/probes/{more.json()['id']}", json={"enabled": True}),
             "at most 150 (SUSTAIN_MAX_TOTAL_RATE")
    # Slowing the first makes room.
    r = await api.patch(f"/api/v1/probes/{fast['id']}", json={"profile": constant(40)})
    assert r.status_code == 200, r.text
    r = await api.patch(f"/api/v1/probes/{more.json()['id']}", json={"enabled": True})
    assert r.status_code == 200, r.text
    # Speeding it up again would not fit (40 + 60 + 60 > 150).
    conflict(await api.patch(f"/api/v1/probes/{fast['id']}", json={"profile": constant(100)}),
             "SUSTAIN_MAX_TOTAL_RATE")


async def test_a_closed_loop_counts_at_max_rate_toward_the_total(
        api: httpx.AsyncClient) -> None:
    endpoint = (await create_endpoint(api, "http://127.0.0.1:9/v1"))["id"]
    assert (await probe(api, endpoint, "open", constant(60))).status_code == 201
    # Two users count as SUSTAIN_MAX_RATE (100/s), the pace closed loops are held to.
    conflict(await probe(api, endpoint, "loop", {"kind": "concurrency", "users": 2,
                                                 "duration_s": 1}),
             "SUSTAIN_MAX_TOTAL_RATE")


BIG_FILE = """\
endpoints:
  - {name: a, base_url: "http://127.0.0.1:9/v1", model: m}
  - {name: b, base_url: "http://127.0.0.1:9/v1", model: m}
probes:
  - {name: p, endpoint: a, schedule: {every: 1h}}
"""


async def test_a_config_file_beyond_a_limit_is_refused_whole(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    """Two endpoints over REST, two in the file: four beyond the limit of three, so nothing of
    the file is written (its probe neither), and the problem names the setting and line."""
    await create_endpoint(api, "http://127.0.0.1:9/v1", name="r1")
    await create_endpoint(api, "http://127.0.0.1:9/v1", name="r2")
    state = runtime_of(app)
    config, located = parse(BIG_FILE, "sustain.yaml", {})
    with pytest.raises(ConfigError) as refused:
        async with state.sessions.begin() as session:
            await sync(session, config, located, "/etc/sustain.yaml",
                       limits=state.settings.load_limits())
    (problem,) = refused.value.problems
    assert (problem.line, problem.field) == (2, "endpoints")  # where the list begins
    assert "at most 3 endpoints (SUSTAIN_MAX_ENDPOINTS)" in problem.message
    assert await count(app, "endpoints") == 2
    assert await count(app, "probes") == 0


async def test_a_config_file_beyond_the_total_rate_is_refused_whole(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    """Two probes of 100 requests/s each, 150 allowed in all: the file is not written."""
    both = BIG_FILE.replace("schedule: {every: 1h}}", "schedule: {every: 1h}, profile: "
                            "{kind: constant, rate: 100, duration_s: 1}}\n"
                            "  - {name: q, endpoint: b, schedule: {every: 1h}, profile: "
                            "{kind: constant, rate: 100, duration_s: 1}}")
    state = runtime_of(app)
    config, located = parse(both, "sustain.yaml", {})
    with pytest.raises(ConfigError) as refused:
        async with state.sessions.begin() as session:
            await sync(session, config, located, "/etc/sustain.yaml",
                       limits=state.settings.load_limits())
    (problem,) = refused.value.problems
    assert "SUSTAIN_MAX_TOTAL_RATE" in problem.message
    assert (await api.get("/api/v1/endpoints")).json()["items"] == []
    assert await count(app, "probes") == 0
