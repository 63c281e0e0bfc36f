"""Packed samples: once the storage job moves a finished run's rows into blocks, every read
(the samples API's pages and CSV, a probe's export pages, the run page's figures, a new SLO's
exact counts) answers exactly as the rows did, each sample once, also while a run is packed
only in part; unfinished runs stay rows; retention drops block partitions with the rows'."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from sustain.service.db import partitions, sample_blocks, sample_packing, samples, status
from sustain.service.db.models import Run
from sustain.service.db.sample_packing import pack_batch, pack_finished
from sustain.service.runs import sample_block
from sustain.service.runs.rows import SampleTuple, sample_tuple
from sustain.service.scheduling.maintenance import maintain
from tests.integration.service.storage import (
    create_probe_rows,
    create_run,
    fetch,
    seed_run,
    synthetic_samples,
)
from tests.integration.service.test_api_samples import all_pages

pytestmark = pytest.mark.usefixtures("storage_job_packs_nothing")

NOW = datetime.now(UTC).replace(microsecond=0)
START = (NOW - timedelta(days=1)).replace(hour=23, minute=59, second=40)
"""The runs cross midnight: their samples lie in two daily partitions."""
LATER = NOW + timedelta(days=1)
"""A cutoff every seeded run finished before."""


async def seed(engine: AsyncEngine) -> tuple[int, list[int]]:
    probe_id = await create_probe_rows(engine, "packed")
    other = await create_probe_rows(engine, "other")
    rng = random.Random(7)
    runs = []
    for i in range(3):
        at = START + timedelta(seconds=20 * i)
        runs.append(await seed_run(engine, probe_id, at,
                                   synthetic_samples(700, at, rng, fail_every=9)))
        await seed_run(engine, other, at, synthetic_samples(40, at, rng))
    return probe_id, runs


async def export_pages(engine: AsyncEngine, probe_id: int, start: datetime, end: datetime,
                       limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        async with AsyncSession(engine) as session:
            page = await samples.probe_page(session, probe_id, start, end, after, limit)
        out.extend(page)
        if len(page) < limit:
            return out
        after = samples.probe_key(page[-1])


async def run_figures(engine: AsyncEngine, run_id: int) -> tuple[Any, ...]:
    async with AsyncSession(engine) as session:
        run = await session.get(Run, run_id)
        assert run is not None
        return (await status.run_latencies(session, run_id, run.started_at),
                await status.first_failure(session, run_id, run.started_at))


async def everything(api: httpx.AsyncClient, engine: AsyncEngine, probe_id: int,
                     runs: list[int]) -> dict[str, Any]:
    return {
        "pages": [await all_pages(api, run_id, 97) for run_id in runs],
        "csv": [(await api.get(f"/api/v1/runs/{run_id}/samples",
                               params={"format": "csv"})).text for run_id in runs],
        "export": await export_pages(engine, probe_id, START + timedelta(seconds=3),
                                     START + timedelta(seconds=50), 211),
        "figures": [await run_figures(engine, run_id) for run_id in runs],
    }


async def test_packed_runs_answer_every_read_as_their_rows_did(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    probe_id, runs = await seed(engine)
    before = await everything(api, engine, probe_id, runs)
    assert [len(page) for page in before["pages"]] == [700, 700, 700]
    assert 0 < len(before["export"]) < 2100

    packed = await pack_finished(engine, LATER)

    assert packed == 3 * 700 + 3 * 40
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(0,)]
    blocks = await fetch(engine, "SELECT count(*), sum(samples) FROM sample_blocks")
    assert blocks == [(7, 2220)]  # a block a run, two for the one that crosses midnight
    days = await fetch(engine, "SELECT count(*) FROM sample_blocks "
                               "WHERE date(sent_from AT TIME ZONE 'UTC') "
                               "<> date(sent_to AT TIME ZONE 'UTC')")
    assert days == [(0,)]
    assert await everything(api, engine, probe_id, runs) == before


async def test_a_run_packed_in_part_reads_each_sample_once(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    probe_id, runs = await seed(engine)
    before = await everything(api, engine, probe_id, runs)

    async with engine.begin() as connection:
        assert await pack_batch(connection, LATER, max_runs=1, max_samples=333) == 333

    (rows,) = await fetch(engine, "SELECT count(*) FROM samples")
    assert rows == (3 * 700 + 3 * 40 - 333,)
    assert await everything(api, engine, probe_id, runs) == before


async def test_unfinished_runs_and_recent_ones_stay_rows(engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    running = await create_run(engine, probe_id, NOW)
    rng = random.Random(1)
    finished = await seed_run(engine, probe_id, NOW, synthetic_samples(30, NOW, rng))
    async with engine.begin() as connection:
        await samples.insert(connection, [
            sample_tuple(running, pos, probe_id, sample)
            for pos, sample in enumerate(synthetic_samples(5, NOW, rng))])

    assert await pack_finished(engine, NOW - timedelta(hours=1)) == 0  # finished too lately
    assert await pack_finished(engine, LATER) == 30  # the running run is left alone

    counts = dict(await fetch(engine, "SELECT run_id, count(*) FROM samples GROUP BY run_id"))
    assert counts == {running: 5}
    assert await fetch(engine, "SELECT run_id, samples FROM sample_blocks") == [(finished, 30)]


async def test_blocks_hold_at_most_an_hour_and_their_bound_of_samples(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    rng = random.Random(2)
    start = NOW - timedelta(hours=3)
    long_run = synthetic_samples(10_000, start, rng)  # 50 ms apart: 8.3 minutes
    spread = [replace(sample, t_sched_ms=None, t_send_ms=sample.seq * 60_000.0,
                      sent_at=start + timedelta(minutes=sample.seq))
              for sample in synthetic_samples(150, start, rng)]
    big = await seed_run(engine, probe_id, start, long_run)
    long = await seed_run(engine, probe_id, start, spread)

    await pack_finished(engine, LATER)

    sizes = await fetch(engine, "SELECT run_id, samples, sent_to - sent_from FROM sample_blocks "
                                "ORDER BY run_id, first_pos")
    assert [n for run, n, _ in sizes if run == big] == [4096, 4096, 1808]
    assert sum(n for run, n, _ in sizes if run == long) == 150
    assert all(span < sample_blocks.MAX_BLOCK_SPAN for _, _, span in sizes)
    assert len([1 for run, _, _ in sizes if run == long]) == 3  # 150 minutes: three blocks


async def test_retention_drops_block_partitions_with_the_rows(engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    rng = random.Random(3)
    old_at = NOW - timedelta(days=20)
    old = await seed_run(engine, probe_id, old_at, synthetic_samples(20, old_at, rng))
    recent_at = NOW - timedelta(days=2)
    recent = await seed_run(engine, probe_id, recent_at, synthetic_samples(20, recent_at, rng))
    await pack_finished(engine, LATER)
    assert {r for (r,) in await fetch(engine, "SELECT run_id FROM sample_blocks")} == {
        old, recent}

    await maintain(engine, sample_retention_days=14, run_retention_days=400, now=NOW)

    assert await fetch(engine, "SELECT run_id, samples FROM sample_blocks") == [(recent, 20)]
    names = {name for (name,) in await fetch(
        engine, "SELECT relname FROM pg_class WHERE relname LIKE 'sample_blocks_p%'")}
    assert f"sample_blocks_p{old_at:%Y%m%d}" not in names
    assert f"sample_blocks_p{recent_at:%Y%m%d}" in names


async def test_a_new_latency_slo_counts_packed_runs_exactly(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    _, runs = await seed(engine)
    body = {"name": "ttft-fast", "probes": ["packed"], "objective": 0.9, "window": "7d",
            "sli": {"kind": "latency", "metric": "ttft", "threshold_ms": 55}}
    created = await api.post("/api/v1/slos", json=body)
    assert created.status_code == 201, created.text
    exact = await fetch(engine, "SELECT run_id, good, total, approximate FROM slo_run_counts "
                                "ORDER BY run_id")
    assert [run_id for run_id, _, _, _ in exact] == runs
    assert all(total > 600 and 0 < good < total and not approximate
               for _, good, total, approximate in exact)
    await api.delete(f"/api/v1/slos/{created.json()['id']}")

    await pack_finished(engine, LATER)
    recreated = await api.post("/api/v1/slos", json=body)
    assert recreated.status_code == 201, recreated.text

    assert await fetch(engine, "SELECT run_id, good, total, approximate FROM slo_run_counts "
                               "ORDER BY run_id") == exact


async def test_blocks_of_one_run_that_overlap_in_pos_read_every_sample_once_in_order(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    """Rows written late (a replica's samples after its run was marked abandoned) are packed
    by a later pass into a block inside an earlier block's range."""
    probe_id = await create_probe_rows(engine)
    start = NOW - timedelta(hours=2)
    measured = synthetic_samples(300, start, random.Random(4), fail_every=7)
    run_id = await create_run(engine, probe_id, start)
    rows = [sample_tuple(run_id, pos, probe_id, sample) for pos, sample in enumerate(measured)]
    late = [row for row in rows if 100 <= row[1] < 200]
    async with engine.begin() as connection:
        await partitions.ensure(connection, {partitions.utc_day(start)})
        await samples.insert(connection, [row for row in rows if row not in late])
        await connection.execute(text(
            "UPDATE runs SET status = 'abandoned', finished_at = :at WHERE id = :r"),
            {"at": start, "r": run_id})
    await pack_finished(engine, LATER)
    async with engine.begin() as connection:
        await samples.insert(connection, late)
    await pack_finished(engine, LATER)

    ranges = await fetch(engine, "SELECT first_pos, last_pos FROM sample_blocks ORDER BY 1")
    assert ranges == [(0, 299), (100, 199)]
    for limit in (1, 25, 97, 300):
        assert [s["pos"] for s in await all_pages(api, run_id, limit)] == list(range(300))
    latencies, failure = await run_figures(engine, run_id)
    assert len(latencies[1]) == 300 - 300 // 7
    assert failure is not None
    assert failure.failed == 300 // 7


async def test_one_packer_at_a_time_the_others_pass(engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    await seed_run(engine, probe_id, NOW, synthetic_samples(30, NOW, random.Random(5)))
    async with engine.begin() as holder:
        await holder.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                             {"k": sample_packing.PACK_LOCK_KEY})
        assert await pack_finished(engine, LATER) == 0
    assert await pack_finished(engine, LATER) == 30


async def test_a_sample_sent_before_its_run_began_does_not_hide_its_block(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    """A wall-clock step: one sample stamped 20 minutes before the run's start (rows older
    than 10 minutes before it are not the run's), the rest on time."""
    probe_id = await create_probe_rows(engine)
    start = NOW - timedelta(hours=2)
    measured = synthetic_samples(50, start, random.Random(6), fail_every=5)
    measured[3] = replace(measured[3], sent_at=start - timedelta(minutes=20))
    run_id = await seed_run(engine, probe_id, start, measured)
    before = (await all_pages(api, run_id, 7), await run_figures(engine, run_id))
    assert len(before[0]) == 49

    await pack_finished(engine, LATER)

    assert await fetch(engine, "SELECT count(*) FROM samples") == [(0,)]
    assert (await all_pages(api, run_id, 7), await run_figures(engine, run_id)) == before


async def test_rows_that_do_not_pack_stay_rows_and_the_rest_are_packed(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    probe_id = await create_probe_rows(engine)
    rng = random.Random(11)
    kept = await seed_run(engine, probe_id, NOW, synthetic_samples(30, NOW, rng))
    packed = await seed_run(engine, probe_id, NOW, synthetic_samples(20, NOW, rng))
    real = sample_block.pack

    def refusing(rows: Sequence[SampleTuple]) -> bytes:
        if rows[0][0] == kept:
            raise ValueError("refused for the test")
        return real(rows)

    monkeypatch.setattr(sample_block, "pack", refusing)

    await pack_finished(engine, LATER)

    assert await fetch(engine, "SELECT run_id, count(*) FROM samples GROUP BY run_id") == [
        (kept, 30)]
    assert await fetch(engine, "SELECT run_id, samples FROM sample_blocks") == [(packed, 20)]
