"""An endpoint's API key is sent to the endpoint, and nowhere else: not stored, not returned,
not logged, not a metric label."""

from __future__ import annotations

import logging

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import runtime_of
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.integration.service.helpers import create_endpoint, create_probe, wait_for_run

SECRET = "sk-sustain-test-0123456789abcdef"


async def test_api_key_reaches_the_endpoint_and_nothing_else(
        api: httpx.AsyncClient, app: FastAPI, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TEST_API_KEY", SECRET)
    monkeypatch.setenv("TEST_WRONG_KEY", "sk-wrong")
    with BackgroundSimulator(SimulatorConfig(ttft_ms=5, itl_ms=1, api_key=SECRET)) as sim:
        good = await create_endpoint(api, sim.base_url, name="good",
                                     auth_secret_ref="env:TEST_API_KEY")
        bad = await create_endpoint(api, sim.base_url, name="bad",
                                    auth_secret_ref="env:TEST_WRONG_KEY")
        runs = {}
        for endpoint in (good, bad):
            probe = await create_probe(api, endpoint["id"], name=f"p-{endpoint['name']}",
                                       enabled=False)
            run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
            runs[endpoint["name"]] = await wait_for_run(api, run_id)
    assert runs["good"]["status"] == "succeeded"
    assert runs["bad"]["status"] == "failed"
    assert runs["bad"]["summary"]["errors"] == {"http_4xx": 1}

    seen = [
        (await api.get("/api/v1/endpoints")).text,
        (await api.get("/api/v1/runs")).text,
        (await api.get("/metrics")).text,
        caplog.text,
    ]
    state = runtime_of(app)
    async with state.engine.connect() as connection:
        for table in ("endpoints", "probes", "runs", "samples"):
            rows = await connection.execute(text(f"SELECT t::text FROM {table} t"))
            seen.extend(row[0] for row in rows)
    assert all(SECRET not in place for place in seen)
