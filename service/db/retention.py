"""Deleting run summaries, sketches and rollups older than the run retention, in batches so no
transaction holds many locks or grows the WAL by much at once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db.models import Rollup, RollupSketch, Run

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
