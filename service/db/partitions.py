"""Daily range partitions of `samples`: created ahead of time, and on demand for a sample whose
day has none; dropped whole once older than the sample retention."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

PARTITION_NAME = re.compile(r"^samples_p(\d{8})$")
PARTITION_LOCK_KEY = 0x5355_5350  # "SUSP": one creator or dropper at a time, over replicas
DAYS_AHEAD = 3


def partition_name(day: date) -> str:
    return f"samples_p{day:%Y%m%d}"


def day_of(name: str) -> date | None:
    """The day a partition holds, or None when `name` is not a sample partition."""
    match = PARTITION_NAME.match(name)
    return None if match is None else datetime.strptime(match[1], "%Y%m%d").replace(
        tzinfo=UTC).date()


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def days_ahead(today: date, ahead: int = DAYS_AHEAD) -> list[date]:
    """Yesterday (late writes) through `ahead` days from today."""
    return [today + timedelta(days=offset) for offset in range(-1, ahead + 1)]


def expired(days: Iterable[date], today: date, retention_days: int) -> list[date]:
    """Partitions whose every sample is older than the retention: the day ended at or before
    today's midnight minus the retention."""
    cutoff = today - timedelta(days=retention_days)
    return sorted(day for day in days if day + timedelta(days=1) <= cutoff)


async def existing(connection: AsyncConnection) -> set[date]:
    rows = await connection.execute(text(
        "SELECT c.relname FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
        "WHERE p.relname = 'samples' AND p.relnamespace = 'public'::regnamespace"))
    return {day for (name,) in rows if (day := day_of(name)) is not None}


async def ensure(connection: AsyncConnection, days: Iterable[date]) -> list[date]:
    """Create the missing partitions of `days` (call in a transaction); returns those created.
    The advisory lock makes replicas that race for the same day take turns."""
    wanted = set(days)
    if not wanted:
        return []
    await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                             {"key": PARTITION_LOCK_KEY})
    missing = sorted(wanted - await existing(connection))
    for day in missing:
        await connection.execute(text(
            f'CREATE TABLE "{partition_name(day)}" PARTITION OF samples '
            f"FOR VALUES FROM ('{day_start(day).isoformat()}') "
            f"TO ('{day_start(day + timedelta(days=1)).isoformat()}')"))
    return missing


async def drop_expired(connection: AsyncConnection, today: date, retention_days: int
                       ) -> list[date]:
    """Drop partitions older than the retention (call in a transaction); idempotent."""
    await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                             {"key": PARTITION_LOCK_KEY})
    old = expired(await existing(connection), today, retention_days)
    for day in old:
        await connection.execute(text(f'DROP TABLE IF EXISTS "{partition_name(day)}"'))
    return old
