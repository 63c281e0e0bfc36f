"""Storage on real Postgres: daily partitions and their retention, run retention, and a write
path that stores every sample exactly once and never blocks on a deleted run."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db import partitions
from sustain.service.db.retention import delete_old_runs
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.store import store
from sustain.service.ingest.writer import SampleWriter
from sustain.service.runs.rows import sample_tuple
from sustain.service.scheduling.maintenance import maintain
from tests.integration.service.storage import (
    create_probe_rows,
    create_run,
    fetch,
    final_of,
    seed_run,
    synthetic_samples,
)

NOW = datetime.now(UTC).replace(microsecond=0)


async def partition_days(engine: AsyncEngine) -> set[date]:
    async with engine.connect() as connection:
        return await partitions.existing(connection)


async def test_maintenance_creates_partitions_ahead_and_drops_expired_ones_whole(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    rng = random.Random(1)
    old = await seed_run(engine, probe_id, NOW - timedelta(days=20),
                         synthetic_samples(20, NOW - timedelta(days=20), rng))
    recent = await seed_run(engine, probe_id, NOW - timedelta(days=2),
                            synthetic_samples(20, NOW - timedelta(days=2), rng))
    today = partitions.utc_day(NOW)
    assert today - timedelta(days=20) in await partition_days(engine)

    report = await maintain(engine, sample_retention_days=14, run_retention_days=400, now=NOW)

    days = await partition_days(engine)
    assert all(today + timedelta(days=d) in days for d in range(-1, partitions.DAYS_AHEAD + 1))
    assert today - timedelta(days=20) not in days
    assert partitions.partition_name(today - timedelta(days=20)) in report.dropped
    counts = dict(await fetch(engine, "SELECT run_id, count(*) FROM samples GROUP BY run_id"))
    assert counts == {recent: 20}
    # the old run's summary and sketches outlive its raw samples
    assert await fetch(engine, "SELECT sketches IS NOT NULL FROM runs WHERE id = :r",
                       r=old) == [(True,)]
    again = await maintain(engine, sample_retention_days=14, run_retention_days=400, now=NOW)
    assert (again.created, again.dropped, again.runs_deleted) == ([], [], 0)


async def test_run_retention_deletes_old_runs_and_rollups_in_batches(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    rng = random.Random(2)
    old_ids = [await seed_run(engine, probe_id, NOW - timedelta(days=500, minutes=i),
                              synthetic_samples(3, NOW - timedelta(days=500), rng))
               for i in range(7)]
    keep = await seed_run(engine, probe_id, NOW - timedelta(days=1),
                          synthetic_samples(3, NOW - timedelta(days=1), rng))
    assert await delete_old_runs(engine, NOW - timedelta(days=400), batch=3) == 7
    assert await fetch(engine, "SELECT id FROM runs") == [(keep,)]
    assert await fetch(engine, "SELECT sketches IS NOT NULL FROM runs WHERE id = :r",
                       r=keep) == [(True,)]
    assert await fetch(engine, "SELECT count(*) FROM runs WHERE id = ANY(:ids)",
                       ids=old_ids) == [(0,)]
    report = await maintain(engine, sample_retention_days=14, run_retention_days=400, now=NOW)
    assert report.rollups_deleted > 0
    assert await fetch(engine, "SELECT count(*) FROM rollups WHERE start < :c",
                       c=NOW - timedelta(days=400)) == [(0,)]
    assert await fetch(engine, "SELECT sum(runs) FROM rollups WHERE width_s = 3600") == [(1,)]


async def test_a_batch_written_twice_is_stored_once(engine: AsyncEngine) -> None:
    """A retry after a commit whose answer was lost writes the same batch again."""
    probe_id = await create_probe_rows(engine)
    samples = synthetic_samples(50, NOW, random.Random(3))
    run_id = await create_run(engine, probe_id, NOW)
    rows = [sample_tuple(run_id, pos, probe_id, s) for pos, s in enumerate(samples)]
    final = final_of(run_id, probe_id, NOW, samples)
    for _ in range(2):
        async with engine.begin() as connection:
            await partitions.ensure(connection, {partitions.utc_day(NOW)})
            await store(connection, rows, [final])
    assert await fetch(engine, "SELECT count(*), count(DISTINCT seq) FROM samples") == [(50, 50)]
    assert await fetch(engine, "SELECT runs, attempts FROM rollups WHERE width_s = 3600") == \
        [(1, 50)]
    assert await fetch(engine, "SELECT status, attempts FROM runs") == [("succeeded", 50)]


async def test_the_writer_drains_runs_in_order_and_skips_deleted_runs_without_blocking(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    doomed, kept = await create_run(engine, probe_id, NOW), await create_run(engine, probe_id, NOW)
    buffer = SampleBuffer(capacity=10_000)
    writer = SampleWriter(engine, buffer, batch_samples=100)
    rng = random.Random(4)
    doomed_samples = synthetic_samples(30, NOW, rng)
    kept_samples = synthetic_samples(250, NOW, rng)
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM runs WHERE id = :id"), {"id": doomed})
    for run_id, samples in ((doomed, doomed_samples), (kept, kept_samples)):
        sink = buffer.open(run_id, probe_id)
        for sample in samples:
            sink.put(sample)
        sink.finish(final_of(run_id, probe_id, NOW, samples))
    writer.start()
    try:
        assert await writer.flush(30)
    finally:
        await writer.close(1)
    assert (writer.written_total, writer.orphaned_total) == (250, 30)
    positions = [p for (p,) in await fetch(
        engine, "SELECT pos FROM samples WHERE run_id = :r ORDER BY pos", r=kept)]
    assert positions == list(range(250))
    assert await fetch(engine, "SELECT status FROM runs") == [("succeeded",)]
    assert buffer.samples == 0


async def test_concurrent_finals_of_one_probe_and_hour_merge_into_one_rollup(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    rng = random.Random(5)
    hour = NOW.replace(minute=0, second=0)
    batches = [synthetic_samples(40, hour, rng) for _ in range(6)]
    await asyncio.gather(*(seed_run(engine, probe_id, hour + timedelta(minutes=i), samples)
                           for i, samples in enumerate(batches)))
    assert await fetch(engine, "SELECT runs, attempts FROM rollups WHERE width_s = 3600") == \
        [(6, 240)]
    assert await fetch(engine, "SELECT count FROM rollup_sketches WHERE width_s = 3600 AND "
                       "metric = 'ttft'") == [(240,)]
