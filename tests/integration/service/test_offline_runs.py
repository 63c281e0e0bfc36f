"""Ticks measured during a database outage are stored once it is back: the first
measurement of a tick becomes its run, with every sample; one that finds the tick
recorded `missed` takes that record over; one that finds the tick already run elsewhere is
kept as a sample-free `skipped` record with trigger `partition`, never as a second run."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import runtime_of
from sustain.service.runtime import Replica
from sustain.service.scheduling.offline import OfflineRuns
from tests.integration.service.storage import (
    create_probe_rows,
    fetch,
    final_of,
    synthetic_samples,
)

TICK = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


async def hold(offline: OfflineRuns, probe_id: int, tick: datetime, count: int,
               seed: int) -> None:
    """A finished offline run of `count` samples (as the executor leaves one)."""
    sink = offline.open(probe_id, tick, tick + timedelta(seconds=1))
    samples = synthetic_samples(count, tick, random.Random(seed))
    for sample in samples:
        sink.put(sample)
    sink.finish(final_of(-1, probe_id, tick, samples))


async def stored_when_written(runtime: Replica) -> None:
    """Store the held runs as the executor's watcher does: again until none is left (a try
    that meets a database error leaves the run held for the next one)."""
    offline = runtime.executor.offline
    for _ in range(100):
        await offline.store(runtime.sessions)
        if not offline.pending:
            break
        await asyncio.sleep(0.1)
    assert not offline.pending
    for _ in range(200):
        if runtime.buffer.samples == 0 and not runtime.buffer.unwritten_finals:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the writer did not write the stored offline runs")


@pytest.mark.usefixtures("api")  # the lifespan: engine, writer
async def test_a_tick_measured_offline_is_stored_as_its_run_with_every_sample(app: FastAPI) -> None:
    runtime = runtime_of(app)
    probe_id = await create_probe_rows(runtime.engine, "offline")
    await hold(runtime.executor.offline, probe_id, TICK, 25, seed=1)
    await stored_when_written(runtime)
    rows = await fetch(runtime.engine, "SELECT id, trigger, status, attempts, claimed_by "
                       "FROM runs WHERE probe_id = :p", p=probe_id)
    assert len(rows) == 1
    run_id, trigger, status, attempts, claimed_by = rows[0]
    assert (trigger, status, attempts) == ("schedule", "succeeded", 25)
    assert claimed_by == runtime.replica_id
    (count,) = (await fetch(runtime.engine, "SELECT count(*) FROM samples WHERE run_id = :r",
                            r=run_id))[0]
    assert count == 25
    assert runtime.executor.offline.pending == 0


@pytest.mark.usefixtures("api")  # the lifespan: engine, writer
async def test_stores_at_the_same_time_store_a_held_tick_once(app: FastAPI) -> None:
    """The executor's watcher and its shutdown may both store what is held."""
    runtime = runtime_of(app)
    probe_id = await create_probe_rows(runtime.engine, "twice")
    await hold(runtime.executor.offline, probe_id, TICK, 10, seed=3)
    await asyncio.gather(*(runtime.executor.offline.store(runtime.sessions) for _ in range(3)))
    await stored_when_written(runtime)
    assert await fetch(runtime.engine, "SELECT trigger, status FROM runs WHERE probe_id = :p",
                       p=probe_id) == [("schedule", "succeeded")]


@pytest.mark.usefixtures("api")  # the lifespan: engine, writer
async def test_a_tick_recorded_missed_meanwhile_is_taken_over(app: FastAPI) -> None:
    runtime = runtime_of(app)
    probe_id = await create_probe_rows(runtime.engine, "missed")
    async with runtime.engine.begin() as connection:
        await connection.execute(text(
            "INSERT INTO runs (probe_id, trigger, scheduled_for, status, finished_at, error) "
            "VALUES (:p, 'schedule', :t, 'missed', now(), 'no replica started it')"),
            {"p": probe_id, "t": TICK})
    await hold(runtime.executor.offline, probe_id, TICK, 10, seed=2)
    await stored_when_written(runtime)
    rows = await fetch(runtime.engine, "SELECT status, attempts, error FROM runs "
                       "WHERE probe_id = :p", p=probe_id)
    assert rows == [("succeeded", 10, None)]


@pytest.mark.usefixtures("api")  # the lifespan: engine, writer
async def test_a_tick_run_elsewhere_too_is_kept_as_a_sample_free_skipped_record(
        app: FastAPI) -> None:
    runtime = runtime_of(app)
    probe_id = await create_probe_rows(runtime.engine, "twice")
    async with runtime.engine.begin() as connection:
        await connection.execute(text(
            "INSERT INTO runs (probe_id, trigger, scheduled_for, status, claimed_by, "
            "started_at, finished_at, attempts) VALUES "
            "(:p, 'schedule', :t, 'succeeded', 'other', :t, :t, 7)"),
            {"p": probe_id, "t": TICK})
    await hold(runtime.executor.offline, probe_id, TICK, 12, seed=3)
    await stored_when_written(runtime)
    rows = await fetch(runtime.engine, "SELECT trigger, status, attempts, error FROM runs "
                       "WHERE probe_id = :p ORDER BY id", p=probe_id)
    assert rows[0][:3] == ("schedule", "succeeded", 7)
    trigger, status, attempts, error = rows[1]
    assert (trigger, status, attempts) == ("partition", "skipped", None)
    assert "these 12 samples were not kept" in error
    (count,) = (await fetch(runtime.engine, "SELECT count(*) FROM samples s JOIN runs r "
                            "ON r.id = s.run_id WHERE r.probe_id = :p", p=probe_id))[0]
    assert count == 0
    assert runtime.executor.offline.duplicates == 1


@pytest.mark.usefixtures("api")
async def test_storing_a_held_run_again_after_a_lost_answer_keeps_one_run(
        app: FastAPI) -> None:
    """The insert committed but the answer never came: the retry finds its own run, not a
    duplicate."""
    runtime = runtime_of(app)
    probe_id = await create_probe_rows(runtime.engine, "retry")
    started = TICK + timedelta(seconds=1)
    async with runtime.engine.begin() as connection:
        await connection.execute(text(
            "INSERT INTO runs (probe_id, trigger, scheduled_for, status, claimed_by, started_at)"
            " VALUES (:p, 'schedule', :t, 'running', :r, :s)"),
            {"p": probe_id, "t": TICK, "r": runtime.replica_id, "s": started})
    await hold(runtime.executor.offline, probe_id, TICK, 9, seed=4)
    await stored_when_written(runtime)
    rows = await fetch(runtime.engine, "SELECT trigger, status, attempts FROM runs "
                       "WHERE probe_id = :p", p=probe_id)
    assert rows == [("schedule", "succeeded", 9)]
