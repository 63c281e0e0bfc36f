"""Reading packed samples (`sample_blocks`): the blocks a page of a run or of a probe's
export needs, decoded one at a time in a worker thread.

A sample is a `samples` row while its run is measured and for a while after; then the storage
job (db.sample_packing) moves it into a block, in a transaction that deletes the rows it
writes, so every sample is in exactly one place at any moment. Readers read the rows first,
then the blocks: a sample packed between the two statements is then seen twice, never
missed, and the merge keeps one (the same `pos`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from sustain.service.runs import sample_block
from sustain.service.runs.rows import POS, RUN_ID, SENT_AT, STORED_COLUMNS, SampleTuple

T = TypeVar("T")

MAX_BLOCK_SPAN = timedelta(hours=1)
"""A block holds samples sent within an hour of its first: a reader of a time range needs
only the blocks that started at most this long before the range."""

def unpack_all(blocks: Sequence[tuple[int, int, bytes]]) -> list[SampleTuple]:
    """The rows of (run_id, probe_id, data) blocks, in order. CPU: for a worker thread."""
    rows: list[SampleTuple] = []
    for run_id, probe_id, data in blocks:
        rows.extend(sample_block.unpack(bytes(data), run_id, probe_id))
    return rows


def _unpack_run(blocks: Sequence[tuple[int, int, bytes]], after_pos: int | None,
                below_pos: int | None, since: datetime | None,
                project: Callable[[SampleTuple], T | None]) -> list[tuple[int, T]]:
    """(pos, project(row)) of the blocks' rows within the bounds (`pos`, and sent at or
    after `since`) whose projection is not None. CPU: for a worker thread."""
    kept: list[tuple[int, T]] = []
    for run_id, probe_id, data in blocks:
        for row in sample_block.unpack(bytes(data), run_id, probe_id):
            pos: int = row[POS]
            if (after_pos is not None and pos <= after_pos) or (
                    below_pos is not None and pos >= below_pos) or (
                    since is not None and row[SENT_AT] < since):
                continue
            value = project(row)
            if value is not None:
                kept.append((pos, value))
    return kept


def whole(row: SampleTuple) -> SampleTuple:
    return row


_NEXT_BLOCK = text("""
    SELECT run_id, probe_id, data, first_pos, sent_from FROM sample_blocks
    WHERE run_id = :r AND last_pos > :after AND (first_pos, sent_from) > (:last_first, :last_at)
      AND (CAST(:below AS integer) IS NULL OR first_pos < CAST(:below AS integer))
      AND (CAST(:since AS timestamptz) IS NULL OR sent_to >= CAST(:since AS timestamptz))
    ORDER BY first_pos, sent_from LIMIT 1
""")


async def each_block(connection: AsyncConnection, run_id: int, sent_since: datetime | None
                     ) -> AsyncIterator[tuple[int, int, bytes]]:
    """Every block of a run that holds a sample sent at or after `sent_since`, one at a
    time, as (run_id, probe_id, data): for a reader that folds a whole run in bounded
    memory."""
    last: tuple[int, datetime] = (-1, datetime.min.replace(tzinfo=UTC))
    while True:
        block = (await connection.execute(_NEXT_BLOCK, {
            "r": run_id, "after": -1, "last_first": last[0], "last_at": last[1],
            "below": None, "since": sent_since})).first()
        if block is None:
            return
        last = (int(block[3]), block[4])
        yield int(block[0]), int(block[1]), bytes(block[2])


async def run_blocks(connection: AsyncConnection, run_id: int, after_pos: int | None,
                     sent_since: datetime | None, below_pos: int | None, limit: int,
                     project: Callable[[SampleTuple], T | None]) -> list[tuple[int, T]]:
    """(pos, project(row)) of a run's packed samples with `pos` > `after_pos` (and <
    `below_pos` when given) sent at or after `sent_since`, in `pos` order, the first `limit`
    of them, those projected to None left out.

    Blocks are read one at a time in order of their first `pos`; the search stops at the
    first block that starts after the last of `limit` samples found, without decoding it.
    Blocks of one run may overlap in `pos` (rows written late, packed by a later pass), so
    it never stops on a count alone. Only the projections are kept, decoded in a worker
    thread."""
    found: list[tuple[int, T]] = []
    last: tuple[int, datetime] = (-1, datetime.min.replace(tzinfo=UTC))
    while True:
        block = (await connection.execute(_NEXT_BLOCK, {
            "r": run_id, "after": -1 if after_pos is None else after_pos,
            "last_first": last[0], "last_at": last[1], "below": below_pos,
            "since": sent_since})).first()
        if block is None:
            break
        first_pos = int(block[3])
        if len(found) >= limit and first_pos > found[limit - 1][0]:
            break
        last = (first_pos, block[4])
        found.extend(await asyncio.to_thread(
            _unpack_run, [(block[0], block[1], block[2])], after_pos, below_pos, sent_since,
            project))
        found.sort(key=lambda item: item[0])
        del found[limit:]
    return found


async def probe_blocks(connection: AsyncConnection, probe_id: int, start: datetime,
                       end: datetime, after: tuple[datetime, int, int] | None,
                       below: tuple[datetime, int, int] | None, limit: int
                       ) -> list[SampleTuple]:
    """A probe's packed samples sent in [start, end), after the key `after` and before the
    key `below` (keys are (sent_at, run_id, pos)), the first `limit` in key order.

    Blocks are read one at a time in order of their first send time; the search stops at
    the first block that starts after the last of `limit` samples found (no later block can
    hold one that precedes it), without decoding it."""
    lower = start if after is None else max(start, after[0])
    upper = end if below is None else min(end, below[0] + timedelta(microseconds=1))
    found: list[SampleTuple] = []
    last: tuple[datetime, int, int] | None = None
    while True:
        rows = (await connection.execute(text(
            "SELECT run_id, probe_id, data, sent_from, first_pos FROM sample_blocks "
            "WHERE probe_id = :p AND sent_from >= :earliest AND sent_from < :upper "
            "AND sent_to >= :lower "
            "AND (CAST(:last_at AS timestamptz) IS NULL "
            "     OR (sent_from, run_id, first_pos) > "
            "        (CAST(:last_at AS timestamptz), :last_run, :last_pos)) "
            "ORDER BY sent_from, run_id, first_pos LIMIT 1"),
            {"p": probe_id, "earliest": lower - MAX_BLOCK_SPAN, "upper": upper,
             "lower": lower, "last_at": None if last is None else last[0],
             "last_run": 0 if last is None else last[1],
             "last_pos": 0 if last is None else last[2]})).all()
        if not rows:
            break
        last = (rows[-1][3], int(rows[-1][0]), int(rows[-1][4]))
        if len(found) >= limit and found[-1][SENT_AT] < last[0]:
            break  # this block and every later one start after the page's last sample
        decoded = await asyncio.to_thread(unpack_all, [(r[0], r[1], r[2]) for r in rows])
        found.extend(row for row in decoded if _in_range(row, start, end, after, below))
        found.sort(key=key_of)
        del found[limit:]
    return found


def key_of(row: SampleTuple) -> tuple[datetime, int, int]:
    key: tuple[datetime, int, int] = (row[SENT_AT], row[RUN_ID], row[POS])
    return key


def _in_range(row: SampleTuple, start: datetime, end: datetime,
              after: tuple[datetime, int, int] | None,
              below: tuple[datetime, int, int] | None) -> bool:
    sent: datetime = row[SENT_AT]
    if not start <= sent < end:
        return False
    key = key_of(row)
    return (after is None or key > after) and (below is None or key < below)


def as_mapping(row: SampleTuple, columns: Sequence[str]) -> dict[str, Any]:
    """A packed row as a reader's mapping of `columns` (the names of STORED_COLUMNS it
    reads)."""
    return {name: row[_INDEX[name]] for name in columns}


_INDEX = {name: index for index, name in enumerate(STORED_COLUMNS)}
