"""Raw samples: the batch insert of the write path, and the pages that reads and exports take
(each in its own short transaction: never a cursor held open across writes to a client), of
rows and packed blocks merged (db.sample_blocks: rows first, then blocks, one answer per
`pos`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, literal, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from sustain.service.db import sample_blocks
from sustain.service.db.models import Run, SampleRow
from sustain.service.runs.rows import (
    SAMPLE_COLUMNS,
    STORED_COLUMNS,
    STORED_TYPES,
    SampleTuple,
)

INSERT_SAMPLES = (
    f"INSERT INTO samples ({', '.join(STORED_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{kind}[]" for i, kind in enumerate(STORED_TYPES, 1))
    + ") ON CONFLICT DO NOTHING"
)
"""One statement per batch, each column an array parameter; rows already written (a retry
after a commit whose answer was lost) are skipped, so every sample is stored exactly once."""

CLOCK_SLACK = timedelta(minutes=10)
"""Samples are time-stamped by the run's clock, runs.started_at by the service's: a margin for
a wall-clock step between the two."""

READ_COLUMNS = [getattr(SampleRow, name) for name in SAMPLE_COLUMNS]


async def insert(connection: AsyncConnection, rows: Sequence[SampleTuple]) -> None:
    """Write rows (call inside a transaction) through the asyncpg connection directly."""
    if not rows:
        return
    raw = await connection.get_raw_connection()
    driver: Any = raw.driver_connection
    await driver.execute(INSERT_SAMPLES, *[list(column) for column in zip(*rows, strict=True)])


async def live_runs(connection: AsyncConnection, run_ids: set[int]) -> set[int]:
    """Which of the runs still exist, locked against deletion until the transaction ends
    (a probe deleted mid-run takes its runs with it; their samples have nowhere to go).

    Their probes are locked first, in id order, as deleting a probe locks it before its runs:
    the rollups written later in this transaction reference the probe, and taking that lock
    after the runs' would deadlock with a concurrent delete."""
    if not run_ids:
        return set()
    await connection.execute(
        text("SELECT id FROM probes WHERE id IN (SELECT probe_id FROM runs WHERE id = ANY(:ids)) "
             "ORDER BY id FOR KEY SHARE"),
        {"ids": sorted(run_ids)})
    rows = await connection.execute(
        text("SELECT id FROM runs WHERE id = ANY(:ids) FOR KEY SHARE"),
        {"ids": sorted(run_ids)})
    return {run_id for (run_id,) in rows}


def run_query(run: Run, after_pos: int | None) -> Select[Any]:
    """A run's samples in buffer order. The sent_at bound lets Postgres skip the partitions
    of other days."""
    query = select(*READ_COLUMNS).where(SampleRow.run_id == run.id).order_by(SampleRow.pos)
    if run.started_at is not None:
        query = query.where(SampleRow.sent_at >= run.started_at - CLOCK_SLACK)
    if after_pos is not None:
        query = query.where(SampleRow.pos > after_pos)
    return query


async def page(session: AsyncSession, run: Run, after_pos: int | None, limit: int
               ) -> list[dict[str, Any]]:
    """Up to `limit` of a run's samples after `after_pos`, in `pos` order, rows and packed."""
    rows = [dict(row._mapping)
            for row in await session.execute(run_query(run, after_pos).limit(limit))]
    below = rows[-1]["pos"] + 1 if len(rows) >= limit else None
    since = None if run.started_at is None else run.started_at - CLOCK_SLACK
    packed = await sample_blocks.run_blocks(
        await session.connection(), run.id, after_pos, since, below, limit, _readable)
    if not packed:
        return rows
    merged = {row["pos"]: row for row in rows}
    for pos, row in packed:
        merged.setdefault(pos, row)
    return [merged[pos] for pos in sorted(merged)][:limit]


def _readable(row: SampleTuple) -> dict[str, Any]:
    mapping: dict[str, Any] = sample_blocks.as_mapping(row, SAMPLE_COLUMNS)
    return mapping


def probe_query(probe_id: int, start: datetime, end: datetime) -> Select[Any]:
    """A probe's samples sent in [start, end), oldest first (for exports)."""
    return (select(*READ_COLUMNS)
            .where(SampleRow.probe_id == probe_id, SampleRow.sent_at >= start,
                   SampleRow.sent_at < end)
            .order_by(SampleRow.sent_at, SampleRow.run_id, SampleRow.pos))


ProbeKey = tuple[datetime, int, int]
"""Where a probe export stands: the (sent_at, run_id, pos) of the last sample written."""


async def probe_page(session: AsyncSession, probe_id: int, start: datetime, end: datetime,
                     after: ProbeKey | None, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` of a probe's samples sent in [start, end) that follow `after`, oldest
    first, rows and packed: one page of an export, read in its own short transaction by the
    caller."""
    query = probe_query(probe_id, start, end)
    if after is not None:
        columns = (SampleRow.sent_at, SampleRow.run_id, SampleRow.pos)
        query = query.where(tuple_(*columns) > tuple_(
            *(literal(value, type_=column.type)
              for column, value in zip(columns, after, strict=True))))
    rows = [dict(row._mapping) for row in await session.execute(query.limit(limit))]
    below = (probe_key(rows[-1]) if len(rows) >= limit else None)
    below_key = None if below is None else (below[0], below[1], below[2] + 1)
    packed = await sample_blocks.probe_blocks(
        await session.connection(), probe_id, start, end, after, below_key, limit)
    if not packed:
        return rows
    merged = {probe_key(row): row for row in rows}
    for row in packed:
        merged.setdefault(sample_blocks.key_of(row),
                          sample_blocks.as_mapping(row, SAMPLE_COLUMNS))
    return [merged[key] for key in sorted(merged)][:limit]


def probe_key(row: dict[str, Any]) -> ProbeKey:
    return row["sent_at"], row["run_id"], row["pos"]
