"""Coordination between replicas through Postgres: one claim per tick, skipped ticks while a
run is in flight, dead replicas' runs abandoned (never a live one's), missed ticks recorded
once, and probe changes announced over LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db import probes as probe_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.engine import session_factory
from sustain.service.scheduling.listener import ProbeListener
from sustain.service.scheduling.liveness import Liveness
from sustain.service.scheduling.scheduler import ProbeScheduler
from tests.integration.service.helpers import app_settings
from tests.integration.service.storage import create_probe_rows, fetch

TICK = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def claim(engine: AsyncEngine, probe_id: int, tick: datetime, replica: str,
                location: str = "default") -> run_queries.Claim | None:
    async with session_factory(engine).begin() as session:
        return await run_queries.claim_scheduled(session, probe_id, tick, replica, location)


async def test_a_tick_is_claimed_once_and_skipped_while_the_previous_run_is_going(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    first = await claim(engine, probe_id, TICK, "a")
    assert first is not None
    assert not first.skipped
    assert await claim(engine, probe_id, TICK, "b") is None
    second = await claim(engine, probe_id, TICK + timedelta(seconds=10), "b")
    assert second is not None
    assert second.skipped
    rows = await fetch(engine, "SELECT status, claimed_by, error FROM runs ORDER BY id")
    assert [(r[0], r[1]) for r in rows] == [("running", "a"), ("skipped", "b")]
    assert "still going" in rows[1][2]

    async with engine.begin() as connection:
        await connection.execute(text("UPDATE runs SET status = 'succeeded' WHERE id = :id"),
                                 {"id": first.run_id})
    third = await claim(engine, probe_id, TICK + timedelta(seconds=20), "c")
    assert third is not None
    assert not third.skipped


async def test_a_run_whose_final_record_waits_in_the_claimer_s_buffer_is_not_in_the_way(
        engine: AsyncEngine) -> None:
    """After a database outage a replica's ended run can still read `running` until its
    writer catches up; the replica says so, and the next tick is not `skipped`."""
    probe_id = await create_probe_rows(engine)
    first = await claim(engine, probe_id, TICK, "a")
    assert first is not None
    async with session_factory(engine).begin() as session:
        second = await run_queries.claim_scheduled(
            session, probe_id, TICK + timedelta(seconds=10), "a", "default", [first.run_id])
    assert second is not None
    assert not second.skipped


async def make_replica(engine: AsyncEngine, ident: str, age_s: float) -> None:
    async with engine.begin() as connection:
        await connection.execute(text(
            "INSERT INTO replicas (id, heartbeat_at) VALUES "
            "(:id, now() - make_interval(secs => :age))"), {"id": ident, "age": age_s})


async def running_run(engine: AsyncEngine, probe_id: int, tick: datetime, replica: str | None,
                      age_s: float = 60) -> int:
    async with engine.begin() as connection:
        return int((await connection.execute(text(
            "INSERT INTO runs (probe_id, trigger, scheduled_for, status, claimed_by, "
            "created_at) VALUES (:p, 'schedule', :t, 'running', :r, "
            "now() - make_interval(secs => :age)) RETURNING id"),
            {"p": probe_id, "t": tick, "r": replica, "age": age_s})).scalar_one())


async def test_runs_of_replicas_without_a_fresh_heartbeat_are_abandoned(
        engine: AsyncEngine) -> None:
    probes = [await create_probe_rows(engine, f"p{i}") for i in range(4)]
    await make_replica(engine, "dead", age_s=10)
    await make_replica(engine, "alive", age_s=0.5)
    dead_run = await running_run(engine, probes[0], TICK, "dead")
    alive_run = await running_run(engine, probes[1], TICK, "alive")
    own_run = await running_run(engine, probes[2], TICK, "me")
    orphan = await running_run(engine, probes[3], TICK, "never-registered")

    liveness = Liveness(engine, "me", interval_s=1.0, in_flight=lambda: 1,
                        own_runs=lambda: {own_run})
    await liveness.beat()
    assert liveness.others == {"alive": 0}
    still = await fetch(engine, "SELECT count(*) FROM runs WHERE status = 'running'")
    assert still == [(4,)], "a replica that just started beating judges nobody yet"

    await liveness.reap()
    rows = dict(await fetch(engine, "SELECT id, status FROM runs"))
    assert rows == {dead_run: "abandoned", alive_run: "running", own_run: "running",
                    orphan: "abandoned"}
    (error,) = (await fetch(engine, "SELECT error FROM runs WHERE id = :i", i=dead_run))[0]
    assert "dead" in error
    assert liveness.abandoned_total == 2
    await liveness.close()
    assert await fetch(engine, "SELECT id FROM replicas WHERE id = 'me'") == []


async def test_a_replica_reaps_only_after_beating_for_three_intervals(
        engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    await make_replica(engine, "dead", age_s=30)
    run_id = await running_run(engine, probe_id, TICK, "dead")
    liveness = Liveness(engine, "me", interval_s=0.2, in_flight=lambda: 0)
    liveness.start()
    try:
        async with asyncio.timeout(30):  # ~0.6 s (three intervals); a hang guard only
            while True:
                await asyncio.sleep(0.1)
                (status,) = (await fetch(engine, "SELECT status FROM runs WHERE id = :i",
                                         i=run_id))[0]
                if status == "abandoned":
                    break
        assert status == "abandoned"
    finally:
        await liveness.close()


async def test_missed_ticks_are_recorded_once_and_never_over_a_run(
        engine: AsyncEngine, database_url: str) -> None:
    probe_id = await create_probe_rows(engine)
    now = datetime.now(UTC)
    since = datetime.fromtimestamp(now.timestamp() // 10 * 10 - 120 + 0.5, UTC)
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE probes SET enabled = true, interval_seconds = 10, schedule_since = :since "
            "WHERE id = :p"), {"since": since, "p": probe_id})
    first_tick = since + timedelta(seconds=9.5)
    later_tick = first_tick + timedelta(seconds=60)
    assert await claim(engine, probe_id, first_tick, "x") is not None
    async with engine.begin() as connection:
        await connection.execute(text("UPDATE runs SET status = 'succeeded'"))
    assert await claim(engine, probe_id, later_tick, "x") is not None, "a tick after the gap"

    sessions = session_factory(engine)

    async def never_run(*_args: object) -> None:
        raise AssertionError("the scheduler is not started here")

    scheduler = ProbeScheduler(
        executor=SimpleNamespace(run_tick=never_run),  # type: ignore[arg-type]
        sessions=sessions, engine=engine,
        settings=app_settings(database_url, misfire_grace_s=2))
    async with sessions() as session:
        (probe,) = await probe_queries.list_all(session, enabled_only=True)
    scheduler.sync(probe)
    recorded = await scheduler.record_missed([probe])
    assert await scheduler.record_missed([probe]) == 0, "idempotent"
    later = datetime.now(UTC)
    await scheduler.shutdown()

    rows = await fetch(engine, "SELECT scheduled_for, status FROM runs ORDER BY 1")
    missed = [t for t, status in rows if status == "missed"]
    assert recorded == len(missed)
    # after the run's tick, up to now - (grace 2 s + margin 5 s), every 10 s
    must = [first_tick + timedelta(seconds=10 * k) for k in range(1, 13)
            if first_tick + timedelta(seconds=10 * k) <= now - timedelta(seconds=8)
            and k != 6]
    may = [t for t in (first_tick + timedelta(seconds=10 * k) for k in range(1, 13))
           if t <= later - timedelta(seconds=7) and t != later_tick]
    assert set(must) <= set(missed) <= set(may)
    assert len(must) >= 9, "the gap before a later run is found too"
    assert rows[0] == (first_tick, "succeeded")
    assert (later_tick, "running") in rows


async def test_probe_changes_are_announced_to_every_listener(
        engine: AsyncEngine, database_url: str) -> None:
    heard: list[int] = []
    reconnects: list[int] = []

    async def on_change(probe_id: int) -> None:
        heard.append(probe_id)

    async def on_reconnect() -> None:
        reconnects.append(1)

    listener = ProbeListener(database_url, on_change, on_reconnect)
    listener.start()
    try:
        async with asyncio.timeout(30):  # the waits below are for conditions; hang guards
            while not listener.connected:  # noqa: ASYNC110 - no event to wait on
                await asyncio.sleep(0.1)
        probe_id = await create_probe_rows(engine)
        async with session_factory(engine).begin() as session:
            await probe_queries.notify_changed(session, probe_id)
            await asyncio.sleep(0.3)  # the behaviour: nothing arrives before the commit
            assert heard == [], "delivered only on commit"
        async with asyncio.timeout(30):
            while not heard:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        assert heard == [probe_id]

        async with engine.connect() as connection:
            await connection.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"))
        async with asyncio.timeout(30):
            while not reconnects:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        assert reconnects, "a lost connection is re-opened and followed by a reconcile"
    finally:
        await listener.close()


async def test_own_runs_the_replica_is_not_executing_are_abandoned(
        engine: AsyncEngine) -> None:
    probes = [await create_probe_rows(engine, f"p{i}") for i in range(2)]
    lost = await running_run(engine, probes[0], TICK, "me")
    mine = await running_run(engine, probes[1], TICK, "me")
    liveness = Liveness(engine, "me", interval_s=1.0, in_flight=lambda: 1,
                        own_runs=lambda: {mine})
    await liveness.beat()
    await liveness.reap()
    rows = dict(await fetch(engine, "SELECT id, status FROM runs"))
    assert rows == {lost: "abandoned", mine: "running"}
    await liveness.close()
