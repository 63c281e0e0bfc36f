"""The hourly storage job: sample partitions for the coming days, retention of old partitions,
runs and rollups. Idempotent, and safe on every replica at once (advisory locks, plain
deletes)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db import partitions, retention

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    created: list[str]
    dropped: list[str]
    runs_deleted: int
    rollups_deleted: int


async def maintain(engine: AsyncEngine, *, sample_retention_days: int,
                   run_retention_days: int, now: datetime | None = None) -> MaintenanceReport:
    now = now or datetime.now(UTC)
    today = partitions.utc_day(now)
    async with engine.begin() as connection:
        created = await partitions.ensure(connection, partitions.days_ahead(today))
    async with engine.begin() as connection:
        dropped = await partitions.drop_expired(connection, today, sample_retention_days)
    cutoff = now - timedelta(days=run_retention_days)
    runs_deleted = await retention.delete_old_runs(engine, cutoff)
    rollups_deleted = await retention.delete_old_rollups(engine, cutoff)
    report = MaintenanceReport(
        created=[partitions.partition_name(d) for d in created],
        dropped=[partitions.partition_name(d) for d in dropped],
        runs_deleted=runs_deleted, rollups_deleted=rollups_deleted)
    if created or dropped or runs_deleted or rollups_deleted:
        logger.info("storage maintenance: created %s, dropped %s, deleted %d runs and %d "
                    "rollups", report.created, report.dropped, runs_deleted, rollups_deleted)
    return report
