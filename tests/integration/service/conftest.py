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
