"""Retention of the audit log and of sign-ins on real Postgres: the hourly maintenance deletes
audit rows older than SUSTAIN_AUDIT_RETENTION_DAYS and expired sign-ins, and keeps the rest
(neither was ever purged: the audit log grew by every anonymous POST)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.app import create_app
from sustain.service.db.retention import delete_old_audit
from sustain.service.scheduling.maintenance import maintain
from tests.integration.service.helpers import app_settings, serving
from tests.integration.service.storage import fetch

NOW = datetime.now(UTC).replace(microsecond=0)


async def add_audit_rows(engine: AsyncEngine, *ages: timedelta) -> None:
    async with engine.begin() as connection:
        for age in ages:
            await connection.execute(text(
                "INSERT INTO audit_log (at, actor, method, path, status) "
                "VALUES (:at, 'anonymous', 'POST', :path, 401)"),
                {"at": NOW - age, "path": f"/aged/{age.total_seconds():.0f}"})


async def add_sessions(engine: AsyncEngine, **expiring_in: timedelta) -> None:
    async with engine.begin() as connection:
        for name, left in expiring_in.items():
            await connection.execute(text(
                "INSERT INTO web_sessions (token_hash, key_hash, expires_at) "
                "VALUES (:token, :key, :expires)"),
                {"token": name, "key": "k" * 64, "expires": NOW + left})


async def test_maintenance_deletes_old_audit_rows_and_expired_sessions_and_keeps_the_rest(
        engine: AsyncEngine) -> None:
    await add_audit_rows(engine, timedelta(days=400), timedelta(days=31),
                         timedelta(days=29, hours=23), timedelta(minutes=5))
    await add_sessions(engine, expired=timedelta(seconds=-1),
                       long_expired=timedelta(days=-200), live=timedelta(hours=1))

    report = await maintain(engine, sample_retention_days=14, run_retention_days=400,
                            audit_retention_days=30, now=NOW)

    assert (report.audit_deleted, report.sessions_deleted) == (2, 2)
    assert sorted(await fetch(engine, "SELECT path FROM audit_log")) == [
        (f"/aged/{timedelta(days=29, hours=23).total_seconds():.0f}",), ("/aged/300",)]
    assert await fetch(engine, "SELECT token_hash FROM web_sessions") == [("live",)]
    again = await maintain(engine, sample_retention_days=14, run_retention_days=400,
                           audit_retention_days=30, now=NOW)
    assert (again.audit_deleted, again.sessions_deleted) == (0, 0)


async def test_audit_retention_deletes_in_batches(engine: AsyncEngine) -> None:
    await add_audit_rows(engine, *(timedelta(days=100, minutes=m) for m in range(7)),
                         timedelta(days=1))
    assert await delete_old_audit(engine, NOW - timedelta(days=90), batch=3) == 7
    assert await fetch(engine, "SELECT count(*) FROM audit_log") == [(1,)]


async def test_the_service_purges_with_its_audit_retention_setting(
        engine: AsyncEngine, database_url: str) -> None:
    """The scheduler's hourly job (it also runs at start) uses SUSTAIN_AUDIT_RETENTION_DAYS."""
    await add_audit_rows(engine, timedelta(days=3), timedelta(hours=1))
    app = create_app(app_settings(database_url, auto_migrate=False, audit_retention_days=2))
    cutoff = NOW - timedelta(days=2)

    async def expired() -> list[tuple[int]]:
        return await fetch(engine, "SELECT count(*) FROM audit_log WHERE at < :c", c=cutoff)

    async with serving(app), asyncio.timeout(30):  # hang guard: the job runs at start
        while await expired() != [(0,)]:  # noqa: ASYNC110 - the database offers no event
            await asyncio.sleep(0.1)
    assert await fetch(engine, "SELECT count(*) FROM audit_log WHERE path LIKE '/aged/%'") \
        == [(1,)]
