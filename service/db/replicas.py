"""Replica heartbeats and loads, and abandoning the runs of replicas that stopped beating.
Times come from the database's clock, so replicas with skewed clocks still agree."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

HEARTBEAT = text("""
    INSERT INTO replicas (id, location, started_at, heartbeat_at, in_flight, stopping)
    VALUES (:id, :location, now(), now(), :in_flight, :stopping)
    ON CONFLICT (id) DO UPDATE
    SET heartbeat_at = now(), in_flight = EXCLUDED.in_flight, stopping = EXCLUDED.stopping,
        location = EXCLUDED.location
""")

OTHER_LOADS = text("""
    SELECT id, in_flight, kind = 'agent' FROM replicas
    WHERE id <> :id AND location = :location AND NOT stopping
      AND heartbeat_at >= now() - make_interval(secs => :stale)
""")

LIVE_LOCATIONS = text("""
    SELECT DISTINCT location FROM replicas
    WHERE NOT stopping AND heartbeat_at >= now() - make_interval(secs => :stale)
""")

ABANDON = text("""
    UPDATE runs r
    SET status = 'abandoned', finished_at = now(),
        error = CASE WHEN r.claimed_by IS NULL THEN 'never started: its replica stopped'
                ELSE 'replica ' || r.claimed_by || ' stopped heartbeating during the run' END
    WHERE r.status IN ('pending', 'running')
      AND r.created_at < now() - make_interval(secs => :stale)
      AND r.claimed_by IS DISTINCT FROM :id
      AND NOT EXISTS (
          SELECT 1 FROM replicas p
          WHERE p.id = r.claimed_by AND p.heartbeat_at >= now() - make_interval(secs => :stale))
    RETURNING r.id, r.probe_id, r.claimed_by
""")
"""Runs claimed by a replica without a fresh heartbeat (or by none, pending for longer than
the staleness): never this replica's own, whose heartbeat may be stale only because the
database was away."""

ABANDON_OWN = text("""
    UPDATE runs SET status = 'abandoned', finished_at = now(),
        error = 'its replica ' || claimed_by || ' lost track of it (restarted, or its claim '
                || 'was committed while the answer was lost)'
    WHERE claimed_by = :id AND status IN ('pending', 'running')
      AND created_at < now() - make_interval(secs => :stale)
      AND NOT (id = ANY(CAST(:mine AS bigint[])))
    RETURNING id, probe_id, claimed_by
""")
"""This replica's own runs that it is not executing: left by an earlier process with the same
replica id, or claimed by a commit whose answer never arrived."""

FORGET = text("DELETE FROM replicas WHERE heartbeat_at < now() - interval '1 day'")


@dataclass(frozen=True, slots=True)
class Peer:
    """Another live replica or agent of a location, as its last heartbeat said."""

    id: str
    in_flight: int
    """Its runs in flight."""
    agent: bool
    """A `sustain agent` (beating over the API, claiming when its own tick fires) rather
    than a replica of the service."""


@dataclass(frozen=True, slots=True)
class AbandonedRun:
    run_id: int
    probe_id: int
    claimed_by: str | None


async def heartbeat(connection: AsyncConnection, replica_id: str, location: str,
                    in_flight: int, stopping: bool) -> None:
    await connection.execute(HEARTBEAT, {"id": replica_id, "location": location,
                                         "in_flight": in_flight, "stopping": stopping})


async def live_peers(connection: AsyncConnection, replica_id: str, location: str,
                     stale_s: float) -> list[Peer]:
    """The other live replicas and agents of the location that are not shutting down (those
    that share its ticks)."""
    rows = await connection.execute(OTHER_LOADS, {"id": replica_id, "location": location,
                                                  "stale": stale_s})
    return [Peer(str(ident), int(load), bool(agent)) for ident, load, agent in rows]


async def other_loads(connection: AsyncConnection, replica_id: str, location: str,
                      stale_s: float) -> dict[str, int]:
    """Runs in flight of each other live replica and agent of the location that is not
    shutting down."""
    return {p.id: p.in_flight for p in await live_peers(connection, replica_id, location,
                                                        stale_s)}


async def live_locations(connection: AsyncConnection, stale_s: float) -> set[str]:
    """Locations with at least one live replica or agent that is not shutting down."""
    return {r[0] for r in await connection.execute(LIVE_LOCATIONS, {"stale": stale_s})}


async def abandon_dead(connection: AsyncConnection, replica_id: str, stale_s: float
                       ) -> list[AbandonedRun]:
    await connection.execute(text("SET LOCAL lock_timeout = '2s'"))
    rows = list(await connection.execute(ABANDON, {"id": replica_id, "stale": stale_s}))
    await connection.execute(FORGET)
    return [AbandonedRun(int(r), int(p), c) for r, p, c in rows]


async def abandon_lost(connection: AsyncConnection, replica_id: str, stale_s: float,
                       mine: set[int]) -> list[AbandonedRun]:
    await connection.execute(text("SET LOCAL lock_timeout = '2s'"))
    rows = await connection.execute(ABANDON_OWN, {"id": replica_id, "stale": stale_s,
                                                  "mine": sorted(mine)})
    return [AbandonedRun(int(r), int(p), c) for r, p, c in rows]


async def remove(connection: AsyncConnection, replica_id: str) -> None:
    """A replica that stops cleanly says so, so no one waits for its heartbeat to go stale."""
    await connection.execute(text("DELETE FROM replicas WHERE id = :id"), {"id": replica_id})
