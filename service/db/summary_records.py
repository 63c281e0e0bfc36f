"""The storage job's conversion of runs stored before summary records (revision 0028): each
run's whole JSONB summary becomes its record (runs.summary_record) and the JSONB keeps only
what SQL reads, in bounded transactions, one replica at a time, going on where the last pass
stopped (what is left is what has no record yet)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sustain.service.runs import summary_record as summaries
from sustain.service.strict_json import dumps

logger = logging.getLogger(__name__)

CONVERT_LOCK_KEY = 0x5355_5352  # "SUSR": one converter at a time, over replicas
BATCH_RUNS = 500

_OLD = text("""
    SELECT id, summary FROM runs
    WHERE summary_record IS NULL AND summary IS NOT NULL AND finished_at IS NOT NULL
      AND id > :after
    ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED
""")
_CONVERT = text("""
    UPDATE runs r SET summary = CAST(c.summary AS jsonb), summary_record = c.record
    FROM unnest(CAST(:ids AS bigint[]), CAST(:summaries AS text[]), CAST(:records AS bytea[]))
        AS c(id, summary, record)
    WHERE r.id = c.id AND r.summary_record IS NULL
""")


def converted(rows: Sequence[tuple[int, Any]]) -> tuple[list[int], list[str], list[bytes]]:
    """(ids, their SQL part as JSON, their records) of (id, whole summary) rows; a summary
    that does not write as strict JSON is left as it is. CPU: for a worker thread."""
    ids, parts, records = [], [], []
    for run_id, summary in rows:
        if not isinstance(summary, dict):
            continue
        try:
            record = summaries.pack_json(dumps(summary), summary)
        except ValueError as error:
            logger.warning("storage: run %s keeps its summary as JSON: %s", run_id, error)
            continue
        ids.append(run_id)
        parts.append(json.dumps(summaries.sql_part(summary)))
        records.append(record)
    return ids, parts, records


async def convert_batch(connection: AsyncConnection, after: int = 0, batch: int = BATCH_RUNS
                        ) -> tuple[int, int]:
    """Convert up to `batch` runs with ids above `after` (call in a transaction); (runs
    looked at, the last id looked at): (0, after) when none is left or another replica is
    converting."""
    locked = (await connection.execute(text("SELECT pg_try_advisory_xact_lock(:key)"),
                                       {"key": CONVERT_LOCK_KEY})).scalar_one()
    if not locked:
        return 0, after
    rows = [(int(run_id), summary) for run_id, summary in await connection.execute(
        _OLD, {"n": batch, "after": after})]
    if not rows:
        return 0, after
    ids, parts, records = await asyncio.to_thread(converted, rows)
    if ids:
        await connection.execute(_CONVERT, {"ids": ids, "summaries": parts,
                                            "records": records})
    return len(rows), rows[-1][0]


async def convert_old(engine: AsyncEngine, max_batches: int = 1_000) -> int:
    """The storage job's pass: batches of `convert_batch` in id order, each its own
    transaction, until none is left (or `max_batches` have run: the next pass goes on).
    Returns runs looked at."""
    done, after = 0, 0
    for _ in range(max_batches):
        async with engine.begin() as connection:
            count, after = await convert_batch(connection, after)
        done += count
        if count < BATCH_RUNS:
            break
    if done:
        logger.info("storage: %d runs' summaries converted into records", done)
    return done
