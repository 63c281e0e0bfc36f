"""A record the database refuses never blocks the others: on real Postgres, the writer stores
everything else at once, keeps the refused record in dead_letters, fails its run with the
reason, counts it, and retries only when the database is unavailable."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from datetime import UTC, datetime

import pytest
from prometheus_client import generate_latest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sustain.probes.measure.sample import Sample
from sustain.service.db import dead_letters, partitions
from sustain.service.db.engine import async_url
from sustain.service.ingest import store as store_module
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.store import store_each, store_run
from sustain.service.ingest.writer import SampleWriter
from sustain.service.metrics import Metrics
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.refusals import Refused
from sustain.service.runs.rows import sample_tuple
from sustain.service.scheduling.offline import HeldRun, store_whole
from tests.integration.service.storage import (
    create_probe_rows,
    create_run,
    fetch,
    final_of,
    synthetic_samples,
)

NOW = datetime.now(UTC).replace(microsecond=0)
INT32_PAST = 2**40
"""A token count no integer column holds: what a server's broken usage report may say."""


def with_bad_usage(sample: Sample) -> Sample:
    """`sample` as if its server had reported INT32_PAST prompt tokens."""
    return dataclasses.replace(sample, measurement=dataclasses.replace(
        sample.measurement, input_tokens=INT32_PAST))


def non_finite_final(final: RunFinal) -> RunFinal:
    """`final` with a figure JSON has no number for, deep in its summary."""
    assert final.summary is not None
    summary = {**final.summary, "steady_state": {"cov_tpot_p90": float("inf")}}
    return dataclasses.replace(final, summary=summary)


async def drain(writer: SampleWriter) -> None:
    writer.start()
    try:
        assert await writer.flush(60)
    finally:
        await writer.close(1)


async def test_a_refused_sample_is_quarantined_its_run_failed_and_other_runs_stored_at_once(
        engine: AsyncEngine) -> None:
    probe_a, probe_b = await create_probe_rows(engine, "a"), await create_probe_rows(engine, "b")
    run_a, run_b = await create_run(engine, probe_a, NOW), await create_run(engine, probe_b, NOW)
    rng = random.Random(1)
    samples_a = synthetic_samples(40, NOW, rng)
    samples_a[17] = with_bad_usage(samples_a[17])
    samples_b = synthetic_samples(60, NOW, rng)
    buffer = SampleBuffer(capacity=10_000)
    batches: list[float] = []
    writer = SampleWriter(engine, buffer, on_batch=batches.append)
    for run_id, probe_id, samples in ((run_a, probe_a, samples_a),
                                      (run_b, probe_b, samples_b)):
        sink = buffer.open(run_id, probe_id)
        for sample in samples:
            sink.put(sample)
        sink.finish(final_of(run_id, probe_id, NOW, samples))

    await drain(writer)

    # one batch, written once: no retry loop, nothing waited behind the refused record
    assert len(batches) == 1
    assert (writer.failures_total, writer.last_error) == (0, None)
    assert writer.written_total == 99
    counts = dict(await fetch(engine, "SELECT run_id, count(*) FROM samples GROUP BY run_id"))
    assert counts == {run_a: 39, run_b: 60}
    statuses = dict(await fetch(engine, "SELECT id, status FROM runs"))
    assert statuses == {run_a: "failed", run_b: "succeeded"}
    [(error,)] = await fetch(engine, "SELECT error FROM runs WHERE id = :r", r=run_a)
    assert "refused 1 of this run's samples" in error
    assert "out_of_range" in error
    assert "dead_letters" in error
    # the failed run keeps its summary and its counts: the figures were measured
    assert await fetch(engine, "SELECT attempts FROM runs WHERE id = :r", r=run_a) == [(40,)]
    [letter] = await fetch(engine, "SELECT kind, run_id, probe_id, pos, reason, error, record "
                           "FROM dead_letters")
    assert letter[:5] == ("sample", run_a, probe_a, 17, "out_of_range")
    assert letter[5] == "input_tokens: 1099511627776 is outside the integer column's range"
    assert json.loads(letter[6])["input_tokens"] == INT32_PAST
    assert writer.refusals.by_reason == {"out_of_range": 1}


async def test_refusals_show_in_metrics_by_reason(engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = [with_bad_usage(s) for s in synthetic_samples(3, NOW, random.Random(2))]
    buffer = SampleBuffer(capacity=100)
    writer = SampleWriter(engine, buffer)
    metrics = Metrics()
    metrics.watch_writes(buffer, writer)
    sink = buffer.open(run_id, probe_id)
    for sample in samples:
        sink.put(sample)
    sink.finish(final_of(run_id, probe_id, NOW, samples))

    await drain(writer)

    exposition = generate_latest(metrics.registry).decode()
    assert 'sustain_storage_rejected_total{reason="out_of_range"} 3.0' in exposition
    assert 'sustain_storage_rejected_total{reason="non_finite"} 0.0' in exposition
    assert writer.refusals.newest is not None
    assert f"run {run_id}" in writer.refusals.newest


async def test_a_final_with_a_non_finite_figure_is_stored_without_its_summary(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    run_id, other = await create_run(engine, probe_id, NOW), await create_run(engine, probe_id,
                                                                              NOW)
    rng = random.Random(3)
    samples, other_samples = synthetic_samples(30, NOW, rng), synthetic_samples(30, NOW, rng)
    buffer = SampleBuffer(capacity=1000)
    writer = SampleWriter(engine, buffer)
    for run, group, final in (
            (run_id, samples, non_finite_final(final_of(run_id, probe_id, NOW, samples))),
            (other, other_samples, final_of(other, probe_id, NOW, other_samples))):
        sink = buffer.open(run, probe_id)
        for sample in group:
            sink.put(sample)
        sink.finish(final)

    await drain(writer)

    rows = {r[0]: r[1:] for r in await fetch(
        engine, "SELECT id, status, summary IS NULL, attempts, error FROM runs")}
    assert rows[other][:3] == ("succeeded", False, 30)
    status, no_summary, attempts, error = rows[run_id]
    assert (status, no_summary, attempts) == ("failed", True, 30)
    assert "non_finite" in error
    assert "steady_state.cov_tpot_p90" in error
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(60,)]
    [(kind, reason, record)] = await fetch(
        engine, "SELECT kind, reason, record FROM dead_letters")
    assert (kind, reason) == ("final", "non_finite")
    assert json.loads(record)["summary"]["steady_state"]["cov_tpot_p90"] == "inf"
    # the run still counts towards availability: its counts were stored
    assert await fetch(engine, "SELECT sum(runs), sum(attempts) FROM rollups "
                       "WHERE width_s = 3600") == [(2, 60)]


async def test_samples_refused_in_an_earlier_batch_fail_the_final_that_comes_later(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(250, NOW, random.Random(4))
    samples[3] = with_bad_usage(samples[3])
    buffer = SampleBuffer(capacity=1000)
    writer = SampleWriter(engine, buffer, batch_samples=100)
    sink = buffer.open(run_id, probe_id)
    for sample in samples:
        sink.put(sample)
    sink.finish(final_of(run_id, probe_id, NOW, samples))

    await drain(writer)

    [(status, error)] = await fetch(engine, "SELECT status, error FROM runs")
    assert status == "failed"
    assert "refused 1 of this run's samples" in error
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(249,)]
    assert writer.failures_total == 0


async def test_many_refused_rows_of_one_run_are_each_quarantined(engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(64, NOW, random.Random(5))
    bad = {0, 1, 30, 31, 63}
    samples = [with_bad_usage(s) if i in bad else s for i, s in enumerate(samples)]
    rows = [sample_tuple(run_id, pos, probe_id, s) for pos, s in enumerate(samples)]
    async with engine.begin() as connection:
        await partitions.ensure(connection, {partitions.utc_day(NOW)})
        stored = await store_each(connection, rows, [final_of(run_id, probe_id, NOW, samples)])
    assert stored.kept == 59
    assert sorted(r.pos for r in stored.refused if r.pos is not None) == sorted(bad)
    assert stored.failed[run_id].startswith("the database refused 5 of this run's samples")
    assert await fetch(engine, "SELECT pos FROM dead_letters ORDER BY pos") == \
        [(p,) for p in sorted(bad)]


async def test_rows_only_the_database_can_refuse_are_found_by_halving(
        engine: AsyncEngine) -> None:
    """A check of the database's own (here one this test adds) that Python cannot foresee."""
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(100, NOW, random.Random(8))
    async with engine.begin() as connection:
        await connection.execute(text(
            "ALTER TABLE samples ADD CONSTRAINT test_refuses_some CHECK (seq NOT IN (7, 77))"))
    buffer = SampleBuffer(capacity=1000)
    writer = SampleWriter(engine, buffer)
    sink = buffer.open(run_id, probe_id)
    for sample in samples:
        sink.put(sample)
    sink.finish(final_of(run_id, probe_id, NOW, samples))

    await drain(writer)

    assert await fetch(engine, "SELECT count(*) FROM samples") == [(98,)]
    assert await fetch(engine, "SELECT pos, reason FROM dead_letters ORDER BY pos") == \
        [(7, "constraint"), (77, "constraint")]
    [(status, error)] = await fetch(engine, "SELECT status, error FROM runs")
    assert status == "failed"
    assert "refused 2 of this run's samples (constraint: " in error
    assert "test_refuses_some" in error


async def test_a_summary_the_database_cannot_hold_is_refused_and_the_run_kept(
        engine: AsyncEngine) -> None:
    """PostgreSQL's jsonb holds no NUL character (SQLSTATE 22P05): a server's text with one,
    in a summary, is the database's refusal, not an outage."""
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(10, NOW, random.Random(9))
    final = final_of(run_id, probe_id, NOW, samples)
    assert final.summary is not None
    final = dataclasses.replace(final, summary={**final.summary, "model": "m\x00"})
    rows = [sample_tuple(run_id, pos, probe_id, s) for pos, s in enumerate(samples)]
    async with engine.begin() as connection:
        await partitions.ensure(connection, {partitions.utc_day(NOW)})
        stored = await store_each(connection, rows, [final])
    assert [(r.kind, r.reason) for r in stored.refused] == [("final", "invalid_text")]
    assert await fetch(engine, "SELECT status, summary IS NULL, attempts FROM runs") == \
        [("failed", True, 10)]


async def test_a_refusal_keeps_a_cancelled_runs_status_and_its_own_error(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(10, NOW, random.Random(10))
    samples[2] = with_bad_usage(samples[2])
    final = dataclasses.replace(final_of(run_id, probe_id, NOW, samples), status="cancelled",
                                error="cancelled over the API")
    rows = [sample_tuple(run_id, pos, probe_id, s) for pos, s in enumerate(samples)]
    async with engine.begin() as connection:
        await partitions.ensure(connection, {partitions.utc_day(NOW)})
        await store_each(connection, rows, [final])
    [(status, error)] = await fetch(engine, "SELECT status, error FROM runs")
    assert status == "cancelled"
    assert error.startswith("cancelled over the API; the database refused 1 of this run's")


async def test_a_record_kept_once_is_not_kept_twice_when_its_batch_is_written_again(
        engine: AsyncEngine) -> None:
    """A retry after a commit whose answer was lost meets the same refused record."""
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(5, NOW, random.Random(11))
    samples[1] = with_bad_usage(samples[1])
    rows = [sample_tuple(run_id, pos, probe_id, s) for pos, s in enumerate(samples)]
    for _ in range(2):
        async with engine.begin() as connection:
            await partitions.ensure(connection, {partitions.utc_day(NOW)})
            await store_each(connection, rows, [])
    assert await fetch(engine, "SELECT count(*) FROM dead_letters") == [(1,)]
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(4,)]


async def test_a_run_measured_during_an_outage_with_a_refused_sample_is_stored_failed(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(10, NOW, random.Random(6))
    samples[4] = with_bad_usage(samples[4])
    held = HeldRun(probe_id, NOW, NOW, samples=samples,
                   final=final_of(run_id, probe_id, NOW, samples))
    async with engine.begin() as connection:
        stored = await store_whole(connection, run_id, held)
    assert [r.pos for r in stored.refused] == [4]
    assert await fetch(engine, "SELECT status FROM runs") == [("failed",)]
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(9,)]


async def test_a_finished_run_is_stored_whole_once_whichever_chunk_a_refused_sample_is_in(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """`store_run`, the one way a finished run is stored (offline, agent upload, `sustain
    probe --save`): rows made before the run id was known go in a chunk at a time, a sample
    refused in a later chunk still fails the run, and storing it again adds nothing."""
    monkeypatch.setattr(store_module, "STORE_CHUNK", 4)
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(10, NOW, random.Random(8))
    samples[6] = with_bad_usage(samples[6])
    rows = [sample_tuple(0, pos, probe_id, s) for pos, s in enumerate(samples)]
    final = final_of(0, probe_id, NOW, samples)
    for _ in range(2):  # a retry (its first commit's answer lost) stores nothing twice
        async with engine.begin() as connection:
            stored = await store_run(connection, run_id, rows, final)
        assert [r.pos for r in stored.refused] == [6]
        assert list(stored.failed) == [run_id]
    assert await fetch(engine, "SELECT status, error LIKE '%refused%' FROM runs") == \
        [("failed", True)]
    assert await fetch(engine, "SELECT run_id, count(*) FROM samples GROUP BY run_id") == \
        [(run_id, 9)]
    assert await fetch(engine, "SELECT run_id, pos FROM dead_letters") == [(run_id, 6)]
    assert await fetch(engine, "SELECT sketches IS NOT NULL FROM runs WHERE id = :r",
                       r=run_id) == [(True,)]


async def test_dead_letters_keep_the_newest_records_only(engine: AsyncEngine) -> None:
    letters = [Refused("sample", 1, 1, "out_of_range", f"error {i}", "{}", i) for i in range(7)]
    async with engine.begin() as connection:
        for letter in letters:
            await dead_letters.keep(connection, [letter], limit=3)
    assert await fetch(engine, "SELECT error FROM dead_letters ORDER BY id") == \
        [("error 4",), ("error 5",), ("error 6",)]


async def test_a_database_that_cannot_take_the_batch_now_is_retried_not_quarantined(
        engine: AsyncEngine, database_url: str) -> None:
    """The database answers but cannot take the batch (its tables locked past the writer's
    lock_timeout: SQLSTATE 55P03): that is the database's state, not the records' fault."""
    probe_id = await create_probe_rows(engine)
    run_id = await create_run(engine, probe_id, NOW)
    samples = synthetic_samples(5, NOW, random.Random(7))
    impatient = create_async_engine(
        async_url(database_url),
        connect_args={"server_settings": {"lock_timeout": "100ms"}})
    buffer = SampleBuffer(capacity=100)
    writer = SampleWriter(impatient, buffer)
    sink = buffer.open(run_id, probe_id)
    for sample in samples:
        sink.put(sample)
    sink.finish(final_of(run_id, probe_id, NOW, samples))
    try:
        async with engine.connect() as blocking:
            transaction = await blocking.begin()
            await blocking.execute(text("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE"))
            writer.start()
            for _ in range(1200):  # until the writer has failed once (bounded: 60 s)
                if writer.failures_total:
                    break
                await asyncio.sleep(0.05)
            assert writer.failures_total >= 1
            assert writer.last_error is not None
            assert writer.refusals.total == 0
            await transaction.rollback()
        assert await writer.flush(60)
        assert writer.last_error is None
    finally:
        await writer.close(1)
        await impatient.dispose()
    assert await fetch(engine, "SELECT status FROM runs") == [("succeeded",)]
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(5,)]
    assert await fetch(engine, "SELECT count(*) FROM dead_letters") == [(0,)]
