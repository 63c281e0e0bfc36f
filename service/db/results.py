"""Writing finished runs: status, counts, summary and sketches (one record on the run's
row), and their share of the hourly and daily rollups, in the writer's transaction right after
their samples.

Set-based: a batch of finals costs a handful of statements whatever its size (array
parameters through asyncpg), and the rollup sketches of the batch are merged in Python first,
so each bucket row is read and written once per batch. Rollup rows are locked in one order
(placeholders inserted, then SELECT ... ORDER BY ... FOR UPDATE), so replicas finishing runs
of the same probe and hour take turns instead of deadlocking or losing a merge.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from sustain.probes.measure import sketch_record
from sustain.probes.measure.sketch import MetricSketch, SketchMerger
from sustain.service.history.aggregate import Aggregate, Counts
from sustain.service.runs import summary_record as summaries
from sustain.service.runs.finals import RunFinal
from sustain.service.strict_json import dumps

ROLLUP_WIDTHS_S = (3600, 86400)
"""Hourly and daily rollups."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EMPTY_SKETCH = MetricSketch().to_bytes()

FINISH_RUNS = """
    UPDATE runs r SET status = u.status, error = u.error,
        summary = CASE WHEN u.summary IS NOT NULL THEN (
            SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
            FROM jsonb_each(CAST(u.summary AS jsonb)) AS e
            WHERE e.key = ANY($17::text[]) AND e.value <> 'null'::jsonb) END,
        summary_record = u.summary_record,
        finished_at = now(), samples_dropped = u.dropped, attempts = u.attempts,
        successes = u.successes, good = u.good, output_tokens = u.output_tokens,
        measured_s = u.measured_s, quality_checked = u.quality_checked,
        quality_passed = u.quality_passed, capacity = u.capacity, capacity_tps = u.capacity_tps,
        sketches = u.sketches
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::integer[],
                $6::integer[], $7::integer[], $8::integer[], $9::bigint[], $10::float8[],
                $11::integer[], $12::integer[], $13::integer[], $14::float8[], $15::bytea[],
                $16::bytea[])
        AS u(id, status, error, summary, dropped, attempts, successes, good, output_tokens,
             measured_s, quality_checked, quality_passed, capacity, capacity_tps, sketches,
             summary_record)
    WHERE r.id = u.id AND r.status IN ('pending', 'running')
    RETURNING r.id, r.location
"""
"""The summary goes to PostgreSQL whole, as before, and is parsed there (what it refuses, a
NUL character for one, refuses the run's final record as it always did), but only its
SQL_KEYS are kept as JSONB; the whole summary is the record (runs.summary_record)."""

ADD_ROLLUP_COUNTS = """
    INSERT INTO rollups (probe_id, location, width_s, start, runs, attempts, successes, good,
                         good_measured_s, output_tokens, measured_s)
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::timestamptz[],
                         $5::integer[], $6::bigint[], $7::bigint[], $8::bigint[], $9::float8[],
                         $10::bigint[], $11::float8[])
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (probe_id, location, width_s, start) DO UPDATE SET
        runs = rollups.runs + EXCLUDED.runs,
        attempts = rollups.attempts + EXCLUDED.attempts,
        successes = rollups.successes + EXCLUDED.successes,
        good = rollups.good + EXCLUDED.good,
        good_measured_s = rollups.good_measured_s + EXCLUDED.good_measured_s,
        output_tokens = rollups.output_tokens + EXCLUDED.output_tokens,
        measured_s = rollups.measured_s + EXCLUDED.measured_s
"""

KEYS = "unnest($1::bigint[], $2::text[], $3::integer[], $4::timestamptz[], $5::text[])"

ENSURE_ROLLUP_SKETCHES = f"""
    INSERT INTO rollup_sketches (probe_id, location, width_s, start, metric, count, sum, min,
                                 max, sketch)
    SELECT k.probe_id, k.location, k.width_s, k.start, k.metric, 0, 0, 'Infinity',
           '-Infinity', $6
    FROM {KEYS} AS k(probe_id, location, width_s, start, metric)
    ORDER BY k.probe_id, k.location, k.metric, k.width_s, k.start
    ON CONFLICT DO NOTHING
"""

LOCK_ROLLUP_SKETCHES = f"""
    SELECT s.probe_id, s.location, s.width_s, s.start, s.metric, s.count, s.sketch
    FROM rollup_sketches s JOIN {KEYS} AS k(probe_id, location, width_s, start, metric)
        USING (probe_id, location, width_s, start, metric)
    ORDER BY s.probe_id, s.location, s.metric, s.width_s, s.start
    FOR UPDATE OF s
"""

UPDATE_ROLLUP_SKETCHES = """
    UPDATE rollup_sketches s SET count = u.count, sum = u.sum, min = u.min, max = u.max,
        sketch = u.sketch
    FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::timestamptz[], $5::text[],
                $6::bigint[], $7::float8[], $8::float8[], $9::float8[], $10::bytea[])
        AS u(probe_id, location, width_s, start, metric, count, sum, min, max, sketch)
    WHERE (s.probe_id, s.location, s.width_s, s.start, s.metric)
        = (u.probe_id, u.location, u.width_s, u.start, u.metric)
"""

BucketKey = tuple[int, str, int, datetime]
"""(probe_id, location, width_s, start)"""
SketchKey = tuple[int, str, int, datetime, str]
"""(probe_id, location, width_s, start, metric)"""


def bucket_start(moment: datetime, width_s: int) -> datetime:
    """Start of the width_s-long bucket (aligned on the Unix epoch, UTC) holding `moment`."""
    seconds = (moment - EPOCH) // timedelta(seconds=1)
    return EPOCH + timedelta(seconds=seconds - seconds % width_s)


@dataclass
class RollupDelta:
    """What a batch of finished runs adds to the rollups: per bucket, summed counts and the
    merged sketch of each metric."""

    buckets: dict[BucketKey, Aggregate] = field(default_factory=lambda: defaultdict(Aggregate))

    def add(self, final: RunFinal, location: str) -> None:
        """Count a finished run in its location's buckets."""
        counts = final.counts
        if counts is None:
            return
        known = counts.good is not None
        run = Counts(runs=1, attempts=counts.attempts, successes=counts.successes,
                     good=counts.good or 0,
                     good_measured_s=counts.measured_s if known else 0.0,
                     output_tokens=counts.output_tokens, measured_s=counts.measured_s)
        for width in ROLLUP_WIDTHS_S:
            bucket = self.buckets[(final.probe_id, location, width,
                                   bucket_start(final.scheduled_for, width))]
            bucket.add_counts(run)
            for (_, metric), data in sorted(final.sketches.items()):
                bucket.add_sketch(metric, data)


def _finish_rows(finals: Sequence[RunFinal]) -> list[tuple[Any, ...]]:
    """FINISH_RUNS's rows: each summary written as JSON and as its record, the sketches as
    theirs. CPU (about a millisecond a run): for a worker thread, off the event loop."""
    rows = []
    for f in finals:
        c = f.counts
        text = None if f.summary is None else dumps(f.summary)
        rows.append((
            f.run_id, f.status, f.error, text,
            f.samples_dropped, None if c is None else c.attempts,
            None if c is None else c.successes, None if c is None else c.good,
            None if c is None else c.output_tokens, None if c is None else c.measured_s,
            None if c is None else c.quality_checked,
            None if c is None else c.quality_passed,
            None if c is None else c.capacity, None if c is None else c.capacity_tps,
            _record(f), None if text is None or f.summary is None
            else summaries.pack_json(text, f.summary)))
    return rows


def _columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)]


def _record(final: RunFinal) -> bytes | None:
    """The run's sketches as one record (sketch_record), None when it has none."""
    if not final.sketches:
        return None
    return sketch_record.pack({key: MetricSketch.from_bytes(data)
                               for key, data in final.sketches.items()})


async def _driver(connection: AsyncConnection) -> Any:
    raw = await connection.get_raw_connection()
    return raw.driver_connection


INSERT_SERVER_SERIES = (
    "INSERT INTO run_server_series (run_id, name, at, value) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT DO NOTHING")


async def apply_all(connection: AsyncConnection, finals: Sequence[RunFinal]) -> set[int]:
    """Record `finals` (inside the writer's transaction); the ids of the runs recorded. A
    run already final is skipped, with nothing written for it: a retry after a commit whose
    answer was lost, or a run abandoned by another replica."""
    finals = list({f.run_id: f for f in finals}.values())  # one final per run, whatever comes
    if not finals:
        return set()
    driver = await _driver(connection)
    rows = await asyncio.to_thread(_finish_rows, finals)
    applied = {int(r[0]): str(r[1]) for r in await driver.fetch(
        FINISH_RUNS, *_columns(rows), list(summaries.SQL_KEYS))}
    recorded = [f for f in finals if f.run_id in applied]

    for f in recorded:
        for name, points in sorted(f.server_series.items()):
            await driver.execute(
                INSERT_SERVER_SERIES, f.run_id, name,
                [datetime.fromtimestamp(at, UTC) for at, _ in points],
                [value for _, value in points])

    delta = RollupDelta()
    for f in recorded:
        delta.add(f, applied[f.run_id])
    await _add_rollups(driver, delta)
    return set(applied)


async def _add_rollups(driver: Any, delta: RollupDelta) -> None:
    if not delta.buckets:
        return
    await driver.execute(ADD_ROLLUP_COUNTS, *_columns([
        (*key, c.runs, c.attempts, c.successes, c.good, c.good_measured_s,
         c.output_tokens, c.measured_s) for key, c in sorted(delta.buckets.items())]))
    mergers: dict[SketchKey, SketchMerger] = {
        (*key, metric): merger for key, bucket in delta.buckets.items()
        for metric, merger in bucket.mergers.items()}
    if not mergers:
        return
    keys = sorted(mergers, key=lambda k: (k[0], k[1], k[4], k[2], k[3]))
    key_columns = _columns(keys)
    await driver.execute(ENSURE_ROLLUP_SKETCHES, *key_columns, EMPTY_SKETCH)
    current = {(r[0], r[1], r[2], r[3], r[4]): (r[5], r[6])
               for r in await driver.fetch(LOCK_ROLLUP_SKETCHES, *key_columns)}
    updates = []
    for key in keys:
        count, data = current[key]
        merger = mergers[key]
        if count:
            merger.add(bytes(data))
        merged = merger.result()
        updates.append((*key, merged.count, merged.sum, merged.min, merged.max,
                        merged.to_bytes()))
    await driver.execute(UPDATE_ROLLUP_SKETCHES, *_columns(updates))
