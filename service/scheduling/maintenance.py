"""The hourly storage job: sample partitions for the coming days, retention of old partitions,
runs, rollups and audit log rows, and expired sign-ins. Idempotent, and safe on every replica
at once (advisory locks, plain deletes)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db import agents, partitions, retention

logger = logging.getLogger(__name__)

STALE_UPLOAD_PARTS_S = 86_400.0
"""Parts of an agent's upload still waiting for the rest after a day are dropped: an agent
re-sends a whole run that was not stored."""


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    created: list[str]
    dropped: list[str]
    runs_deleted: int
    rollups_deleted: int
    audit_deleted: int = 0
    sessions_deleted: int = 0


async def maintain(engine: AsyncEngine, *, sample_retention_days: int,
                   run_retention_days: int, audit_retention_days: int = 90,
                   now: datetime | None = None) -> MaintenanceReport:
    """One pass; retentions are in days (SUSTAIN_SAMPLE_/RUN_/AUDIT_RETENTION_DAYS)."""
    now = now or datetime.now(UTC)
    today = partitions.utc_day(now)
    async with engine.begin() as connection:
        created = await partitions.ensure(connection, partitions.days_ahead(today))
    async with engine.begin() as connection:
        dropped = await partitions.drop_expired(connection, today, sample_retention_days)
    cutoff = now - timedelta(days=run_retention_days)
    runs_deleted = await retention.delete_old_runs(engine, cutoff)
    rollups_deleted = await retention.delete_old_rollups(engine, cutoff)
    audit_deleted = await retention.delete_old_audit(
        engine, now - timedelta(days=audit_retention_days))
    sessions_deleted = await retention.delete_expired_sessions(engine, now)
    async with engine.begin() as connection:
        parts_deleted = await agents.forget_stale_parts(connection, STALE_UPLOAD_PARTS_S)
    if parts_deleted:
        logger.info("storage maintenance: dropped %d parts of agent uploads that never "
                    "completed", parts_deleted)
    report = MaintenanceReport(
        created=[partitions.partition_name(d) for d in created],
        dropped=[partitions.partition_name(d) for d in dropped],
        runs_deleted=runs_deleted, rollups_deleted=rollups_deleted,
        audit_deleted=audit_deleted, sessions_deleted=sessions_deleted)
    if created or dropped or runs_deleted or rollups_deleted or audit_deleted \
            or sessions_deleted:
        logger.info("storage maintenance: created %s, dropped %s, deleted %d runs, %d "
                    "rollups, %d audit rows and %d expired sign-ins", report.created,
                    report.dropped, runs_deleted, rollups_deleted, audit_deleted,
                    sessions_deleted)
    return report
