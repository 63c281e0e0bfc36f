"""Records the database refused: kept with the reason, bounded, newest first."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from sustain.service.db.models import DeadLetter
from sustain.service.runs.refusals import Refused

MAX_DEAD_LETTERS = 10_000
"""Rows kept; older ones are deleted as new ones come (about 650 MB at the 64 KiB bound on
a record, typically far less)."""

INSERT = text(
    "INSERT INTO dead_letters (kind, run_id, probe_id, pos, reason, error, record) "
    "VALUES (:kind, :run_id, :probe_id, :pos, :reason, :error, :record) "
    "ON CONFLICT (run_id, kind, (coalesce(pos, -1))) DO NOTHING")

PRUNE = text(
    "DELETE FROM dead_letters WHERE id <= (SELECT id FROM dead_letters ORDER BY id DESC "
    "OFFSET :keep LIMIT 1)")


async def keep(connection: AsyncConnection, refused: Sequence[Refused],
               limit: int = MAX_DEAD_LETTERS) -> None:
    """Add `refused` (inside the writer's transaction; a record kept before is kept once) and
    drop the oldest beyond `limit`."""
    if not refused:
        return
    await connection.execute(INSERT, [
        {"kind": r.kind, "run_id": r.run_id, "probe_id": r.probe_id, "pos": r.pos,
         "reason": r.reason, "error": r.error, "record": r.record} for r in refused])
    await connection.execute(PRUNE, {"keep": limit})


async def of_run(session: AsyncSession, run_id: int, limit: int,
                 after_id: int | None = None) -> Sequence[DeadLetter]:
    """A run's refused records, oldest first: at most `limit`, after `after_id` (a page's
    last id)."""
    query = select(DeadLetter).where(DeadLetter.run_id == run_id).order_by(DeadLetter.id)
    if after_id is not None:
        query = query.where(DeadLetter.id > after_id)
    rows = await session.execute(query.limit(limit))
    return rows.scalars().all()
