"""Daily range partitions of `samples` and of `sample_blocks` (the same days for both): created
ahead of time, and on demand for a sample or block whose day has none; dropped whole once
older than the sample retention."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

PARENTS = ("samples", "sample_blocks")
"""The tables partitioned by day: raw samples as rows, and packed (db.sample_blocks)."""
PARTITION_NAME = re.compile(r"^(?:samples|sample_blocks)_p(\d{8})$")
PARTITION_LOCK_KEY = 0x5355_5350  # "SUSP": one creator or dropper at a time, over replicas
DAYS_AHEAD = 3


def partition_name(day: date, parent: str = "samples") -> str:
    return f"{parent}_p{day:%Y%m%d}"


def day_of(name: str) -> date | None:
    """The day a partition holds, or None when `name` is not a partition of PARENTS."""
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


async def existing(connection: AsyncConnection, parent: str = "samples") -> set[date]:
    rows = await connection.execute(text(
        "SELECT c.relname FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
        "WHERE p.relname = :parent AND p.relnamespace = 'public'::regnamespace"),
        {"parent": parent})
    return {day for (name,) in rows if (day := day_of(name)) is not None}


async def ensure(connection: AsyncConnection, days: Iterable[date]) -> list[date]:
    """Create the missing partitions of `days`, of both PARENTS (call in a transaction);
    returns the days whose `samples` partition was created. The advisory lock makes replicas
    that race for the same day take turns."""
    wanted = set(days)
    if not wanted:
        return []
    await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                             {"key": PARTITION_LOCK_KEY})
    created: list[date] = []
    for parent in PARENTS:
        missing = sorted(wanted - await existing(connection, parent))
        for day in missing:
            await connection.execute(text(
                f'CREATE TABLE "{partition_name(day, parent)}" PARTITION OF {parent} '
                f"FOR VALUES FROM ('{day_start(day).isoformat()}') "
                f"TO ('{day_start(day + timedelta(days=1)).isoformat()}')"))
        if parent == "samples":
            created = missing
    return created


async def drop_expired(connection: AsyncConnection, today: date, retention_days: int
                       ) -> list[date]:
    """Drop partitions of both PARENTS older than the retention (call in a transaction);
    idempotent. Returns the days whose `samples` partition was dropped."""
    await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                             {"key": PARTITION_LOCK_KEY})
    dropped: list[date] = []
    for parent in PARENTS:
        old = expired(await existing(connection, parent), today, retention_days)
        for day in old:
            await connection.execute(
                text(f'DROP TABLE IF EXISTS "{partition_name(day, parent)}"'))
        if parent == "samples":
            dropped = old
    return dropped
