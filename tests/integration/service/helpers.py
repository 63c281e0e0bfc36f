"""REST helpers for service tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from sustain.service.config import Settings
from tests.processes import ADMIN_HEADERS, TEST_ADMIN_KEY, TEST_POOL_SIZE


async def create_endpoint(api: httpx.AsyncClient, base_url: str, **fields: Any
                          ) -> dict[str, Any]:
    body = {"name": "sim", "base_url": base_url, "model": "sim-model", **fields}
    r = await api.post("/api/v1/endpoints", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def create_probe(api: httpx.AsyncClient, endpoint_id: int, **fields: Any
                       ) -> dict[str, Any]:
    body = {"name": "p1", "endpoint_id": endpoint_id, "interval_s": 3600, **fields}
    r = await api.post("/api/v1/probes", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def wait_for_run(api: httpx.AsyncClient, run_id: int, timeout_s: float = 20.0
                       ) -> dict[str, Any]:
    """Poll a run until it leaves pending/running."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        run = (await api.get(f"/api/v1/runs/{run_id}")).json()
        if run["status"] not in ("pending", "running"):
            return dict(run)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"run {run_id} still {run['status']} after {timeout_s}s")
        await asyncio.sleep(0.1)


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and a client that talks to it in-process."""
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                          base_url="http://sustain.test",
                          headers=ADMIN_HEADERS) as client,
    ):
        yield client


def samples_of(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


TEST_SECRET_ENV = "TEST_*"
"""The variables `env:` references of in-process test apps may read (unless a test sets its own
SUSTAIN_SECRET_ENV): tests name their secrets TEST_..., never SUSTAIN_..."""


def app_settings(database_url: str, **fields: Any) -> Settings:
    """Settings of an in-process test app: its database, the test admin key, secrets read
    from TEST_* variables, two measurement workers whatever the machine's CPUs, the test
    services' small database pool, and raw samples kept ten years: tests seed runs on fixed
    dates, and the app's maintenance would otherwise drop their day partitions once those
    dates are more than the default 14 days old (retention is tested on its own, with its
    own clock)."""
    return Settings(**{"admin_key": SecretStr(TEST_ADMIN_KEY), "database_url": database_url,
                       "secret_env": TEST_SECRET_ENV, "measure_workers": 2,
                       "database_pool_size": int(TEST_POOL_SIZE),
                       "database_api_pool_size": int(TEST_POOL_SIZE),
                       "sample_retention_days": 3650, **fields})
