"""A service nobody can get into yet (no SUSTAIN_ADMIN_KEY, no stored key a person can use)
says so, with both ways in: `sustain serve` in one WARNING line at start, and the sign-in page
to whoever opens it. Once either way in exists, both are quiet. On the test's own PostgreSQL,
the app driven through its ASGI interface with its real lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from sustain.service.access.keys import Role
from sustain.service.app import create_app, runtime_of
from sustain.service.cli.serve import say_when_no_key_gets_in
from sustain.service.db import keys as key_queries
from sustain.service.db.engine import create_engine, session_factory
from sustain.service.db.first_key import NO_KEY_REMEDIES
from tests.conftest import asyncpg_dsn
from tests.integration.service.helpers import app_settings, serving
from tests.processes import free_port

FORM = {"content-type": "application/x-www-form-urlencoded"}
CREATE = "<code>sustain keys create --name admin --role admin</code>"
GENERATE = "<code>sustain keys generate</code>"


@pytest.fixture
def keyless(database_url: str) -> FastAPI:
    return create_app(app_settings(database_url, auto_migrate=False, admin_key=None))


@pytest.fixture
async def anonymous(keyless: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        serving(keyless),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=keyless),
                          base_url="http://sustain.test") as client,
    ):
        yield client


async def store_key(app: FastAPI, role: Role, *, revoked: bool = False) -> str:
    async with runtime_of(app).api_sessions() as session:
        created = await key_queries.create(session, f"{role.value}-{revoked}", role, "test",
                                           "edge-1" if role is Role.agent else None)
        if revoked:
            await key_queries.revoke(session, created.id, datetime.now(UTC))
        await session.commit()
    return created.key


async def test_the_sign_in_page_says_how_to_get_in_until_a_key_exists(
        keyless: FastAPI, anonymous: httpx.AsyncClient) -> None:
    assert (await anonymous.get("/")).headers["location"] == "/login"
    page = await anonymous.get("/login")
    assert page.status_code == 200
    assert 'id="no-key"' in page.text
    assert "SUSTAIN_ADMIN_KEY is not set" in page.text
    assert CREATE in page.text, "a way in: a stored key"
    assert GENERATE in page.text, "the other: SUSTAIN_ADMIN_KEY"

    refused = await anonymous.post("/login", content="key=sk_sustain_guess", headers=FORM)
    assert refused.status_code == 401
    assert 'id="no-key"' in refused.text, "a refused key gets the same word"

    await store_key(keyless, Role.agent)
    await store_key(keyless, Role.admin, revoked=True)
    assert 'id="no-key"' in (await anonymous.get("/login")).text, \
        "an agent key signs no one in, and a revoked key is no key"

    viewer = await store_key(keyless, Role.viewer)
    assert 'id="no-key"' not in (await anonymous.get("/login")).text
    signed_in = await anonymous.post("/login", content=f"key={viewer}", headers=FORM)
    assert signed_in.status_code == 303


async def test_the_sign_in_page_is_quiet_with_an_admin_key(api: httpx.AsyncClient) -> None:
    page = await api.get("/login", headers={"authorization": ""})
    assert page.status_code == 200
    assert 'id="no-key"' not in page.text


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING
            and r.name == "sustain.service.cli"]


def test_serve_warns_at_start_in_one_line_with_both_ways_in(
        database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "sustain.service.cli")
    say_when_no_key_gets_in(app_settings(database_url, admin_key=None), database_url)
    [warning] = warnings_of(caplog)
    line = warning.getMessage()
    assert "\n" not in line
    assert "SUSTAIN_ADMIN_KEY is not set" in line
    assert "sustain keys create --name admin --role admin" in line
    assert "sustain keys generate" in line
    assert line.endswith(NO_KEY_REMEDIES)


def test_serve_warns_on_a_new_database_the_service_has_yet_to_migrate(
        database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """No keys table yet is no key yet (`serve` migrates a new database as it starts)."""

    async def drop_keys() -> None:
        connection = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            await connection.execute("DROP TABLE api_keys CASCADE")
        finally:
            await connection.close()

    asyncio.run(drop_keys())
    caplog.set_level(logging.WARNING, "sustain.service.cli")
    say_when_no_key_gets_in(app_settings(database_url, admin_key=None), database_url)
    assert len(warnings_of(caplog)) == 1


async def _store_viewer(database_url: str) -> None:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with session_factory(engine)() as session:
            await key_queries.create(session, "person", Role.viewer, "test")
            await session.commit()
    finally:
        await engine.dispose()


def test_serve_is_quiet_when_a_way_in_exists_or_the_database_cannot_tell(
        database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "sustain.service.cli")
    say_when_no_key_gets_in(app_settings(database_url), database_url)  # the admin key is set
    closed = make_url(database_url).set(host="127.0.0.1", port=free_port())
    unreachable = closed.render_as_string(hide_password=False)
    say_when_no_key_gets_in(app_settings(unreachable, admin_key=None), unreachable)
    asyncio.run(_store_viewer(database_url))
    say_when_no_key_gets_in(app_settings(database_url, admin_key=None), database_url)
    assert warnings_of(caplog) == []
