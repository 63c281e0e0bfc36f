"""Locations through Postgres: each (probe, tick, location) is claimed once, runs of one
location never make another's ticks skipped, replicas share ticks (and claim spreading) only
with replicas of their own location, and a location with nothing alive records its ticks
missed with that reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db import probes as probe_queries
from sustain.service.db import replicas
from sustain.service.db import runs as run_queries
from sustain.service.db.engine import session_factory
from sustain.service.scheduling.liveness import Liveness
from sustain.service.scheduling.scheduler import ProbeScheduler
from tests.integration.service.helpers import app_settings
from tests.integration.service.storage import create_probe_rows, fetch

TICK = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def claim(engine: AsyncEngine, probe_id: int, tick: datetime, replica: str,
                location: str) -> run_queries.Claim | None:
    async with session_factory(engine).begin() as session:
        return await run_queries.claim_scheduled(session, probe_id, tick, replica, location)


async def test_each_location_claims_a_tick_once(engine: AsyncEngine) -> None:
    probe_id = await create_probe_rows(engine)
    west = await claim(engine, probe_id, TICK, "w1", "eu-west")
    east = await claim(engine, probe_id, TICK, "e1", "us-east")
    assert west is not None
    assert east is not None
    assert not west.skipped
    assert not east.skipped, "a run in flight elsewhere does not make this location busy"
    assert await claim(engine, probe_id, TICK, "w2", "eu-west") is None
    rows = await fetch(engine, "SELECT location, claimed_by, status FROM runs ORDER BY id")
    assert rows == [("eu-west", "w1", "running"), ("us-east", "e1", "running")]

    later = await claim(engine, probe_id, TICK + timedelta(seconds=60), "w1", "eu-west")
    assert later is not None
    assert later.skipped, "the location's own previous run is still going"


async def test_a_replica_shares_ticks_only_with_replicas_of_its_location(
        engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await replicas.heartbeat(connection, "w1", "eu-west", 3, False)
        await replicas.heartbeat(connection, "w2", "eu-west", 1, False)
        await replicas.heartbeat(connection, "e1", "us-east", 0, False)
        assert await replicas.other_loads(connection, "w1", "eu-west", 15) == {"w2": 1}
        assert await replicas.other_loads(connection, "e1", "us-east", 15) == {}
        assert await replicas.live_locations(connection, 15) == {"eu-west", "us-east"}
        await replicas.heartbeat(connection, "e1", "us-east", 0, True)
        assert await replicas.live_locations(connection, 15) == {"eu-west"}, \
            "a replica shutting down no longer keeps its location alive"


async def test_the_heartbeat_records_the_replica_s_location(engine: AsyncEngine) -> None:
    liveness = Liveness(engine, "w1", interval_s=1.0, in_flight=lambda: 0,
                        location="eu-west")
    await liveness.beat()
    assert await fetch(engine, "SELECT id, location FROM replicas") == [("w1", "eu-west")]
    await liveness.close()


def scheduler_for(engine: AsyncEngine, database_url: str, location: str) -> ProbeScheduler:
    async def never_run(*_args: object) -> None:
        raise AssertionError("the scheduler is not started here")

    return ProbeScheduler(
        executor=SimpleNamespace(run_tick=never_run),  # type: ignore[arg-type]
        sessions=session_factory(engine), engine=engine,
        settings=app_settings(database_url, misfire_grace_s=2, location=location))


async def test_a_replica_schedules_only_the_probes_of_its_location(
        engine: AsyncEngine, database_url: str) -> None:
    here = await create_probe_rows(engine, "here")
    elsewhere = await create_probe_rows(engine, "elsewhere")
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE probes SET enabled = true, locations = CASE WHEN id = :h "
            "THEN ARRAY['eu-west', 'us-east'] ELSE ARRAY['ap-south'] END"), {"h": here})
    scheduler = scheduler_for(engine, database_url, "us-east")
    async with session_factory(engine)() as session:
        probes = await probe_queries.list_all(session, enabled_only=True)
    for probe in probes:
        scheduler.sync(probe)
    try:
        assert set(scheduler.specs()) == {here}
        assert elsewhere not in scheduler.specs()
    finally:
        await scheduler.shutdown()


async def test_ticks_of_a_location_with_nothing_alive_are_missed_with_that_reason(
        engine: AsyncEngine, database_url: str) -> None:
    probe_id = await create_probe_rows(engine)
    since = datetime.now(UTC) - timedelta(seconds=60)
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE probes SET enabled = true, interval_seconds = 10, schedule_since = :since, "
            "locations = ARRAY['default', 'far'] WHERE id = :p"),
            {"since": since, "p": probe_id})
    async with engine.begin() as connection:
        await replicas.heartbeat(connection, "here", "default", 0, False)
    scheduler = scheduler_for(engine, database_url, "default")
    async with session_factory(engine)() as session:
        (probe,) = await probe_queries.list_all(session, enabled_only=True)
    try:
        recorded = await scheduler.record_missed([probe])
    finally:
        await scheduler.shutdown()
    rows = await fetch(engine, "SELECT location, scheduled_for, error FROM runs "
                               "WHERE status = 'missed' ORDER BY 1, 2")
    assert recorded == len(rows) > 0
    by_location: dict[str, list[tuple[datetime, str]]] = {}
    for location, tick, error in rows:
        by_location.setdefault(location, []).append((tick, error))
    assert set(by_location) == {"default", "far"}
    assert [t for t, _ in by_location["default"]] == [t for t, _ in by_location["far"]], \
        "every location's ticks are checked together"
    assert {e for _, e in by_location["far"]} == {"no live replica or agent in location far"}
    assert {e for _, e in by_location["default"]} == {run_queries.MISSED_IN_TIME}
