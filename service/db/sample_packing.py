"""The storage job's packing of finished runs' sample rows into blocks (`sample_blocks`,
runs.sample_block): in bounded transactions that delete the rows they write as blocks, one
packer at a time over replicas, going on where the last pass stopped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sustain.service.db import partitions, samples
from sustain.service.db.sample_blocks import MAX_BLOCK_SPAN
from sustain.service.runs import sample_block
from sustain.service.runs.rows import POS, PROBE_ID, RUN_ID, SENT_AT, STORED_COLUMNS, SampleTuple

logger = logging.getLogger(__name__)

_CANDIDATES = text("""
    SELECT DISTINCT s.run_id FROM samples s JOIN runs r ON r.id = s.run_id
    WHERE s.sent_at < :cutoff AND r.finished_at < :cutoff
    LIMIT :n
""")
"""Runs with rows to pack: finished before the cutoff (a run never finished stays rows until
its day's partition is dropped)."""
PACK_LOCK_KEY = 0x5355_5342  # "SUSB": one packer at a time, over replicas

_TAKE = text(f"""
    WITH picked AS (
        SELECT run_id, pos, sent_at FROM samples
        WHERE run_id = ANY(:ids) AND sent_at < :cutoff
        ORDER BY run_id, pos LIMIT :n FOR UPDATE SKIP LOCKED)
    DELETE FROM samples s USING picked p
    WHERE s.run_id = p.run_id AND s.pos = p.pos AND s.sent_at = p.sent_at
    RETURNING {", ".join("s." + name for name in STORED_COLUMNS)}
""")
"""Up to :n rows of the runs, deleted and returned in one statement (rows another packer
holds are skipped, not waited for)."""

_INSERT = text("""
    INSERT INTO sample_blocks (run_id, first_pos, sent_from, last_pos, sent_to, probe_id,
                               samples, data)
    SELECT * FROM unnest(CAST(:run_ids AS bigint[]), CAST(:first AS integer[]),
                         CAST(:sent_from AS timestamptz[]), CAST(:last AS integer[]),
                         CAST(:sent_to AS timestamptz[]), CAST(:probe_ids AS bigint[]),
                         CAST(:samples AS integer[]), CAST(:data AS bytea[]))
""")


@dataclass(frozen=True, slots=True)
class Block:
    """A packed block as stored: its row's columns."""

    run_id: int
    first_pos: int
    sent_from: datetime
    last_pos: int
    sent_to: datetime
    probe_id: int
    samples: int
    data: bytes


def blocks_of(rows: Sequence[SampleTuple]) -> tuple[list[Block], list[SampleTuple]]:
    """Rows (any runs, any order) packed into blocks: each run's rows in `pos` order, cut at
    MAX_BLOCK_SAMPLES samples, MAX_BLOCK_SPAN of send time or a UTC midnight (a block lies in
    one day's partition, and is dropped with that day). Each block is read back before it
    is kept; the rows of one that does not read back exactly, or does not pack, are
    returned as they are, to stay rows. CPU: for a worker thread."""
    ordered = sorted(rows, key=lambda row: (row[RUN_ID], row[POS]))
    blocks: list[Block] = []
    unpacked: list[SampleTuple] = []
    for _, run_rows in groupby(ordered, key=lambda row: row[RUN_ID]):
        chunk: list[SampleTuple] = []
        earliest = latest = datetime.max
        for row in run_rows:
            sent: datetime = row[SENT_AT]
            if chunk and (len(chunk) >= sample_block.MAX_BLOCK_SAMPLES
                          or max(latest, sent) - min(earliest, sent) >= MAX_BLOCK_SPAN
                          or partitions.utc_day(sent) != partitions.utc_day(earliest)):
                _add(chunk, blocks, unpacked)
                chunk = []
            if chunk:
                earliest, latest = min(earliest, sent), max(latest, sent)
            else:
                earliest = latest = sent
            chunk.append(row)
        if chunk:
            _add(chunk, blocks, unpacked)
    return blocks, unpacked


def _add(rows: Sequence[SampleTuple], blocks: list[Block], unpacked: list[SampleTuple]
         ) -> None:
    try:
        data = sample_block.pack(rows)
        faithful = sample_block.identical(
            sample_block.unpack(data, rows[0][RUN_ID], rows[0][PROBE_ID]), rows)
    except (ValueError, TypeError, OverflowError) as error:
        logger.warning("storage: %d samples of run %s stay rows: they do not pack (%s)",
                       len(rows), rows[0][RUN_ID], error)
        unpacked.extend(rows)
        return
    if not faithful:
        logger.warning("storage: %d samples of run %s stay rows: their block does not read "
                       "back as they are", len(rows), rows[0][RUN_ID])
        unpacked.extend(rows)
        return
    sent = [row[SENT_AT] for row in rows]
    blocks.append(Block(rows[0][RUN_ID], rows[0][POS], min(sent), rows[-1][POS], max(sent),
                        rows[0][PROBE_ID], len(rows), data))


async def pack_batch(connection: AsyncConnection, cutoff: datetime, max_runs: int,
                     max_samples: int) -> int:
    """Pack the rows of up to `max_runs` runs that finished before `cutoff`, at most
    `max_samples` of them (call in a transaction; the rows are deleted and the blocks
    written together). Returns the samples taken: 0 when there is nothing to do, or when
    another replica is packing (one packer at a time, so a run's blocks are cut from its
    rows in one order).

    Probes, then runs, are locked before the rows, in id order, as deleting a probe locks
    them (a delete of the probe waits, never deadlocks)."""
    locked = (await connection.execute(text("SELECT pg_try_advisory_xact_lock(:key)"),
                                       {"key": PACK_LOCK_KEY})).scalar_one()
    if not locked:
        return 0
    ids = [run_id for (run_id,) in await connection.execute(
        _CANDIDATES, {"cutoff": cutoff, "n": max_runs})]
    live = await samples.live_runs(connection, set(ids))
    if not live:
        return 0
    rows = [tuple(row) for row in await connection.execute(
        _TAKE, {"ids": sorted(live), "cutoff": cutoff, "n": max_samples})]
    if not rows:
        return 0
    blocks, unpacked = await asyncio.to_thread(blocks_of, rows)
    if blocks:
        await partitions.ensure(connection, {partitions.utc_day(b.sent_from) for b in blocks})
        await connection.execute(_INSERT, {
            "run_ids": [b.run_id for b in blocks], "first": [b.first_pos for b in blocks],
            "sent_from": [b.sent_from for b in blocks], "last": [b.last_pos for b in blocks],
            "sent_to": [b.sent_to for b in blocks], "probe_ids": [b.probe_id for b in blocks],
            "samples": [b.samples for b in blocks], "data": [b.data for b in blocks]})
    await samples.insert(connection, unpacked)
    return len(rows)


async def pack_finished(engine: AsyncEngine, cutoff: datetime, *, max_runs: int = 500,
                        max_samples: int = 20_000, max_batches: int = 1_000) -> int:
    """The storage job's packing: batches of `pack_batch`, each its own transaction, until
    nothing finished before `cutoff` is left as rows (or `max_batches` have run: the next
    pass goes on). Returns the samples packed."""
    packed = 0
    for _ in range(max_batches):
        async with engine.begin() as connection:
            done = await pack_batch(connection, cutoff, max_runs, max_samples)
        packed += done
        if not done:
            break
    if packed:
        logger.info("storage: packed %d samples of finished runs into blocks", packed)
    return packed


