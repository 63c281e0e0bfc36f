"""The app on a private database, driven in-process through its ASGI interface with its real
lifespan (engine, scheduler, HTTP clients)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.app import create_app
from sustain.service.db.engine import create_engine
from sustain.service.scheduling import scheduler
from tests.integration.service.helpers import app_settings, serving


@pytest.fixture
def app(database_url: str) -> FastAPI:
    return create_app(app_settings(database_url, auto_migrate=False))


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as client:
        yield client


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on the test's private database (storage tests that skip the app)."""
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def storage_job_packs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's own storage job, whose first pass starts with the app, neither packs samples
    nor converts summaries: the tests of those passes run them when they mean to, and count
    what they did. (A pass of the app's would hold the one-packer lock while the test's pass
    runs, which then passes, or do the test's work before it.)"""

    async def nothing(*_: object, **__: object) -> int:
        return 0

    monkeypatch.setattr(scheduler, "pack_finished", nothing)
    monkeypatch.setattr(scheduler, "convert_old", nothing)
