"""Deleting run summaries, sketches and rollups older than the run retention, audit log rows
older than the audit retention and expired sign-ins, in batches so no transaction holds many
locks or grows the WAL by much at once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db.models import AuditEntry, Rollup, RollupSketch, Run, WebSession

DELETE_BATCH = 5000


async def delete_old_runs(engine: AsyncEngine, cutoff: datetime,
                          batch: int = DELETE_BATCH) -> int:
    """Delete runs scheduled before `cutoff` (their sketches and samples cascade); one
    transaction per batch. Returns how many were deleted; 0 when there is nothing to do."""
    deleted = 0
    while True:
        async with engine.begin() as connection:
            ids = select(Run.id).where(Run.scheduled_for < cutoff).limit(batch)
            result = await connection.execute(
                delete(Run).where(Run.id.in_(ids.scalar_subquery())).returning(Run.id))
            count = len(result.all())
        deleted += count
        if count < batch:
            return deleted


async def delete_old_rollups(engine: AsyncEngine, cutoff: datetime) -> int:
    """Delete rollups whose bucket started before `cutoff`."""
    async with engine.begin() as connection:
        deleted = 0
        for table in (Rollup, RollupSketch):
            result = await connection.execute(
                delete(table).where(table.start < cutoff).returning(table.probe_id))
            deleted += len(result.all())
    return deleted


async def delete_old_audit(engine: AsyncEngine, cutoff: datetime,
                           batch: int = DELETE_BATCH) -> int:
    """Delete audit log rows written before `cutoff` (oldest first, by the index on `at`);
    one transaction per batch. Returns how many were deleted."""
    deleted = 0
    while True:
        async with engine.begin() as connection:
            ids = select(AuditEntry.id).where(AuditEntry.at < cutoff).limit(batch)
            result = await connection.execute(
                delete(AuditEntry).where(AuditEntry.id.in_(ids.scalar_subquery()))
                .returning(AuditEntry.id))
            count = len(result.all())
        deleted += count
        if count < batch:
            return deleted


async def delete_expired_sessions(engine: AsyncEngine, now: datetime) -> int:
    """Delete status-page sign-ins that expired before `now` (a sign-in also sweeps them, but
    one may not come for months)."""
    async with engine.begin() as connection:
        result = await connection.execute(
            delete(WebSession).where(WebSession.expires_at < now)
            .returning(WebSession.token_hash))
        return len(result.all())
