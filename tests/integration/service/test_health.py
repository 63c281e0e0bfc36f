"""/healthz and /readyz: readiness reports the database, the schema revision and the scheduler."""

from __future__ import annotations

import httpx

from service.api.app import create_app
from service.config import Settings
from service.db.migrate import head_revision
from tests.integration.service.helpers import serving


async def test_healthz_and_readyz_when_everything_is_up(api: httpx.AsyncClient) -> None:
    assert (await api.get("/healthz")).json() == {"status": "ok"}
    r = await api.get("/readyz")
    assert r.status_code == 200
    assert r.json()["checks"] == {"database": "ok", "migrations": "ok", "scheduler": "ok",
                                  "buffer": "ok", "writer": "ok"}


async def test_readyz_is_503_on_an_unmigrated_database(empty_database_url: str) -> None:
    app = create_app(Settings(database_url=empty_database_url, auto_migrate=False))
    async with serving(app) as api:
        r = await api.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"]["migrations"] == f"at None, head is {head_revision()}"


async def test_readyz_is_503_when_the_database_is_unreachable() -> None:
    app = create_app(Settings(database_url="postgresql://postgres@127.0.0.1:1/none",
                              auto_migrate=False))
    async with serving(app) as api:
        r = await api.get("/readyz")
        assert r.status_code == 503
        assert r.json()["checks"]["database"].startswith("unreachable")
        assert (await api.get("/healthz")).status_code == 200
        assert (await api.get("/api/v1/endpoints")).status_code == 503


async def test_auto_migrate_brings_an_empty_database_to_head(empty_database_url: str) -> None:
    app = create_app(Settings(database_url=empty_database_url, auto_migrate=True))
    async with serving(app) as api:
        r = await api.get("/readyz")
    assert r.status_code == 200
    assert r.json()["checks"]["migrations"] == "ok"
