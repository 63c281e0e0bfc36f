"""/healthz and /readyz: readiness reports the database, the schema revision and the scheduler."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import create_app, runtime_of
from sustain.service.db.migrate import head_revision
from tests.integration.service.helpers import app_settings, serving


async def test_healthz_and_readyz_when_everything_is_up(api: httpx.AsyncClient) -> None:
    assert (await api.get("/healthz")).json() == {"status": "ok"}
    r = await api.get("/readyz")
    assert r.status_code == 200
    assert r.json()["checks"] == {"database": "ok", "migrations": "ok", "scheduler": "ok",
                                  "buffer": "ok", "writer": "ok"}


async def test_readyz_is_503_on_an_unmigrated_database(empty_database_url: str) -> None:
    app = create_app(app_settings(empty_database_url, auto_migrate=False))
    async with serving(app) as api:
        r = await api.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"]["migrations"] == f"at None, head is {head_revision()}"


async def test_readyz_is_503_when_the_database_is_unreachable() -> None:
    app = create_app(app_settings("postgresql://postgres@127.0.0.1:1/none",
                              auto_migrate=False))
    async with serving(app) as api:
        r = await api.get("/readyz")
        assert r.status_code == 503
        assert r.json()["checks"]["database"].startswith("unreachable")
        assert (await api.get("/healthz")).status_code == 200
        assert (await api.get("/api/v1/endpoints")).status_code == 503


async def test_auto_migrate_brings_an_empty_database_to_head(empty_database_url: str) -> None:
    app = create_app(app_settings(empty_database_url, auto_migrate=True))
    async with serving(app) as api:
        r = await api.get("/readyz")
    assert r.status_code == 200
    assert r.json()["checks"]["migrations"] == "ok"


async def test_readyz_stays_ready_on_a_schema_a_newer_release_migrated_but_not_an_older_one(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    """A rolling upgrade's pre-upgrade hook migrates before the old pods are replaced: they
    keep serving. A schema behind this release is not ready."""
    state = runtime_of(app)
    async with state.engine.begin() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    ahead = await api.get("/readyz")
    assert ahead.status_code == 200
    assert "newer than this release" in ahead.json()["checks"]["migrations"]
    async with state.engine.begin() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = '0005'"))
    behind = await api.get("/readyz")
    assert behind.status_code == 503
    async with state.engine.begin() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = :head"),
                                 {"head": head_revision()})
