"""Ticks claimed ahead, in batches, through Postgres: a batch costs the same statements for 5
ticks as for 50, two replicas claiming the same ticks at once claim each exactly once, a
tick claimed ahead starts at its firing without a database statement, a busy probe's tick is
left to its firing, the batch honours the per-probe lock that run-now takes, and claims given
up or not started in time leave no running run behind, nor does a replica that closes. A
reconcile reads whole only the probes that changed (however they changed), and records the
missed ticks of many probes in as few statements as those of a few."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.probes.client.clients import HttpClients
from sustain.probes.runner import InProcess
from sustain.probes.workers.conductor import START_LEAD_NS
from sustain.probes.workers.pool import WorkerPool
from sustain.service.db import probes as probe_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.engine import session_factory
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.metrics import Metrics
from sustain.service.scheduling.ahead import Upcoming
from sustain.service.scheduling.executor import RunExecutor, dispatch_lead_s
from sustain.service.scheduling.scheduler import ProbeScheduler
from sustain.service.ticks.schedule import Every
from tests.integration.service.helpers import app_settings
from tests.integration.service.storage import create_probe_rows, create_run, fetch

TICK = datetime.fromtimestamp((datetime.now(UTC).timestamp() // 60 + 60) * 60, UTC)
"""An hour ahead: what is claimed for it waits (its timer has not fired) while a test looks."""
GRACE_S = 15.0


@contextmanager
def counted(engine: AsyncEngine) -> Iterator[list[str]]:
    """Every SQL statement the engine sends while the block runs."""
    statements: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", before)
    try:
        yield statements
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", before)


@asynccontextmanager
async def executor_on(engine: AsyncEngine, replica: str) -> AsyncIterator[RunExecutor]:
    """A replica's executor alone (no writer, heartbeat or scheduler beside it), measuring
    in-process."""
    clients = HttpClients(10)
    executor = RunExecutor(session_factory(engine), InProcess(clients), Metrics(), replica,
                           SampleBuffer(10_000))
    try:
        yield executor
    finally:
        await executor.close()
        await clients.aclose()


async def probes(engine: AsyncEngine, count: int, prefix: str = "p") -> list[int]:
    return [await create_probe_rows(engine, f"{prefix}{i}") for i in range(count)]


def batch_of(probe_ids: list[int], tick: datetime) -> list[Upcoming]:
    return [Upcoming(p, tick, tick, GRACE_S) for p in probe_ids]


async def test_a_batch_of_50_ticks_takes_as_many_statements_as_a_batch_of_5(
        engine: AsyncEngine) -> None:
    ids = await probes(engine, 55)
    async with executor_on(engine, "r1") as executor:
        with counted(engine) as few:
            assert await executor.claim_ahead(batch_of(ids[:5], TICK))
        with counted(engine) as many:
            assert await executor.claim_ahead(batch_of(ids[5:], TICK))
        assert executor.claimed_ahead == 55
        assert executor.held.batches == 2
        rows = await fetch(engine, "SELECT count(*), count(DISTINCT probe_id) FROM runs "
                                   "WHERE status = 'running' AND claimed_by = 'r1'")
        assert rows == [(55, 55)]
    assert len(many) == len(few) <= 4, many
    assert await fetch(engine, "SELECT id FROM runs") == [], "closing gave them back"


async def test_two_replicas_claiming_the_same_ticks_at_once_claim_each_exactly_once(
        engine: AsyncEngine) -> None:
    ids = await probes(engine, 30)
    ticks = batch_of(ids, TICK)
    async with executor_on(engine, "r1") as one, executor_on(engine, "r2") as two:
        await asyncio.gather(one.claim_ahead(ticks), two.claim_ahead(list(reversed(ticks))))
        mine = {run.probe.id for run in one.held.waiting.values()}
        theirs = {run.probe.id for run in two.held.waiting.values()}
        assert mine.isdisjoint(theirs)
        assert mine | theirs == set(ids)
        assert {k[0] for k in one.held.elsewhere} == theirs, "what the other took is left to it"
        assert {k[0] for k in two.held.elsewhere} == mine, "nothing is left to claim at the tick"
        rows = await fetch(engine, "SELECT probe_id, count(*) FROM runs GROUP BY probe_id")
        assert sorted(rows) == [(p, 1) for p in sorted(ids)]


async def test_a_tick_claimed_ahead_starts_at_its_firing_without_a_statement(
        engine: AsyncEngine) -> None:
    ahead_id, late_id = await probes(engine, 2)
    if datetime.now(UTC).second >= 50:  # the tick must stay the current one throughout
        await asyncio.sleep(11)
    tick = Every(60).latest_at_or_before(datetime.now(UTC), timedelta(seconds=61))
    assert tick is not None
    async with executor_on(engine, "r1") as executor:
        # its timer is set for later: the job's firing, now, starts it (a late loop timer)
        later = datetime.now(UTC) + timedelta(seconds=60)
        await executor.claim_ahead([Upcoming(ahead_id, tick, later, GRACE_S)])
        ((run_id,),) = await fetch(engine, "SELECT id FROM runs")
        assert executor.claimed_ahead == 1
        with counted(engine) as statements:
            await executor.run_tick(ahead_id, "ahead", Every(60), 0.0, 59.0)
            assert await executor.drain(30)
        assert statements == []
        assert run_id in executor.buffer.unwritten_finals, "the run ran to its final record"

        with counted(engine) as statements:  # a tick not claimed ahead is claimed at once
            await executor.run_tick(late_id, "late", Every(60), 0.0, 59.0)
            assert await executor.drain(30)
        assert any("INSERT INTO runs" in s for s in statements)
    rows = await fetch(engine, "SELECT probe_id, scheduled_for FROM runs ORDER BY id")
    assert rows == [(ahead_id, tick), (late_id, tick)]


async def test_a_tick_claimed_ahead_starts_by_itself_when_it_fires(
        engine: AsyncEngine) -> None:
    (probe_id,) = await probes(engine, 1)
    async with executor_on(engine, "r1") as executor:
        assert executor.lead_s == 0.0, "measuring in-process starts at once: no lead"
        fire_at = datetime.now(UTC) + timedelta(seconds=1)
        await executor.claim_ahead([Upcoming(probe_id, TICK, fire_at, GRACE_S)])
        ((run_id,),) = await fetch(engine, "SELECT id FROM runs")
        assert executor.claimed_ahead == 1
        assert executor.run_ids() == {run_id}, "a claim not yet started is still this replica's"
        started = asyncio.get_running_loop().time()
        while run_id not in executor.buffer.unwritten_finals:  # a hang guard bounds it
            assert asyncio.get_running_loop().time() - started < 30
            await asyncio.sleep(0.05)
        assert datetime.now(UTC) >= fire_at, "never before its firing"
        assert executor.claimed_ahead == 0


def test_runs_in_worker_processes_are_dispatched_the_stage_start_lead_early() -> None:
    assert dispatch_lead_s(WorkerPool(1)) == START_LEAD_NS / 1e9 > 0
    assert dispatch_lead_s(InProcess(HttpClients(1))) == 0.0


async def test_a_busy_probe_s_tick_is_left_to_its_firing(engine: AsyncEngine) -> None:
    busy, free = await probes(engine, 2)
    await create_run(engine, busy, TICK - timedelta(seconds=60))
    async with executor_on(engine, "r1") as executor:
        await executor.claim_ahead(batch_of([busy, free], TICK))
        assert set(executor.held.waiting) == {(free, TICK)}
        assert not executor.held.elsewhere, "a busy tick is neither ours nor another's yet"
        rows = await fetch(engine, "SELECT probe_id FROM runs WHERE scheduled_for = :t",
                           t=TICK)
        assert rows == [(free,)]


async def test_a_batch_waits_for_the_probe_lock_a_run_now_holds(engine: AsyncEngine) -> None:
    (probe_id,) = await probes(engine, 1)
    async with executor_on(engine, "r1") as executor, \
            session_factory(engine).begin() as holder:
        await run_queries.lock_probe(holder, probe_id)
        claiming = asyncio.create_task(executor.claim_ahead(batch_of([probe_id], TICK)))
        await asyncio.sleep(0.5)
        assert not claiming.done(), "the batch waits for the probe's lock"
        await holder.commit()
        assert await claiming
        assert executor.claimed_ahead == 1


async def test_claims_given_up_are_deleted_and_claims_never_started_are_missed(
        engine: AsyncEngine) -> None:
    gone, stalled = await probes(engine, 2)
    async with executor_on(engine, "r1") as executor:
        await executor.claim_ahead(batch_of([gone, stalled], TICK))
        executor.release_probe(gone)
        await executor.settle(TICK)
        assert await fetch(engine, "SELECT probe_id, status FROM runs") == [
            (stalled, "running")]
        await executor.settle(TICK + timedelta(seconds=GRACE_S + 2))
        assert executor.claimed_ahead == 0
        assert executor.run_ids() == set(), "nothing left that this replica answers for"
    ((status, error),) = await fetch(engine, "SELECT status, error FROM runs")
    assert status == "missed"
    assert "r1" in error


async def test_a_claim_ahead_that_fires_while_its_probe_still_runs_here_is_recorded_skipped(
        engine: AsyncEngine) -> None:
    """As a tick claimed at its firing is: kept, `skipped`, never deleted (the other replicas
    saw it taken and leave it alone, so deleted it had no record until found missed)."""
    (probe_id,) = await probes(engine, 1)
    async with executor_on(engine, "r1") as executor:
        await executor.claim_ahead(batch_of([probe_id], TICK))
        ((run_id,),) = await fetch(engine, "SELECT id FROM runs")
        executor._running.add(probe_id)  # its previous run, measured here, still going
        executor._start_ahead((probe_id, TICK))
        await executor.settle(TICK)
        executor._running.discard(probe_id)
        assert run_id not in executor.run_ids()
    ((found, status, error),) = await fetch(engine, "SELECT id, status, error FROM runs")
    assert (found, status) == (run_id, "skipped")
    assert "still going" in error


async def test_missed_ticks_of_30_probes_take_as_many_statements_as_of_3(
        engine: AsyncEngine, database_url: str) -> None:
    ids = await probes(engine, 33)
    since = datetime.now(UTC) - timedelta(seconds=120)
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE probes SET enabled = true, interval_seconds = 10, schedule_since = :since"),
            {"since": since})

    async def never_run(*_args: object) -> None:
        raise AssertionError("the scheduler is not started here")

    sessions = session_factory(engine)
    scheduler = ProbeScheduler(
        executor=SimpleNamespace(run_tick=never_run),  # type: ignore[arg-type]
        sessions=sessions, engine=engine,
        settings=app_settings(database_url, misfire_grace_s=2))
    async with sessions() as session:
        rows = await probe_queries.list_all(session, enabled_only=True)
    try:
        with counted(engine) as few:
            recorded_few = await scheduler.record_missed(rows[:3])
        with counted(engine) as many:
            recorded_many = await scheduler.record_missed(rows[3:])
    finally:
        await scheduler.shutdown()
    assert recorded_few >= 3 * 9
    assert recorded_many >= 30 * 9
    assert len(many) == len(few)
    assert len(await fetch(engine, "SELECT DISTINCT probe_id FROM runs")) == len(ids)
    watermarks = await fetch(engine, "SELECT DISTINCT ticks_checked_until IS NOT NULL "
                                     "FROM probes")
    assert watermarks == [(True,)]


async def test_a_replica_that_closes_gives_back_the_ticks_it_claimed_ahead(
        engine: AsyncEngine) -> None:
    ids = await probes(engine, 3)
    async with executor_on(engine, "r1") as executor:
        await executor.claim_ahead(batch_of(ids, datetime.now(UTC) + timedelta(seconds=60)))
        assert len(await fetch(engine, "SELECT id FROM runs")) == 3
        await executor.close()
        assert executor.run_ids() == set()
    assert await fetch(engine, "SELECT id FROM runs") == []


def stub_scheduler(engine: AsyncEngine, database_url: str) -> ProbeScheduler:
    async def never_run(*_args: object) -> None:
        raise AssertionError("the scheduler is not started here")

    return ProbeScheduler(
        executor=SimpleNamespace(  # type: ignore[arg-type]
            run_tick=never_run, remember=lambda _pairs: None,
            release_probe=lambda _probe_id: None),
        sessions=session_factory(engine), engine=engine,
        settings=app_settings(database_url))


async def test_a_reconcile_rereads_only_probes_that_changed_however_they_changed(
        engine: AsyncEngine, database_url: str) -> None:
    ids = await probes(engine, 3)
    async with engine.begin() as connection:
        await connection.execute(text("UPDATE probes SET enabled = true"))
    scheduler = stub_scheduler(engine, database_url)
    try:
        assert await scheduler.reconcile()
        assert set(scheduler.specs()) == set(ids)
        with counted(engine) as quiet:
            assert await scheduler.reconcile()
        assert not any("probes.workload" in s for s in quiet), "nothing changed: no probe read"
        async with engine.begin() as connection:  # no NOTIFY: only the reconcile can see it
            await connection.execute(text(
                "UPDATE probes SET jitter_seconds = 3 WHERE id = :p"), {"p": ids[1]})
        with counted(engine) as changed:
            assert await scheduler.reconcile()
        assert any("probes.workload" in s for s in changed)
        assert scheduler.specs()[ids[1]].jitter_s == 3
        assert scheduler.specs()[ids[0]].jitter_s == 0
    finally:
        await scheduler.shutdown()
