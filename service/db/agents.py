"""What the service stores for its agents: their heartbeats (rows of `replicas`, kind
`agent`), the probes of their location, and the parts of the runs they upload until the
whole run can be stored."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from sustain.service.db.models import AgentUploadPart, Endpoint, Probe, Run

AGENT_BEAT = text("""
    INSERT INTO replicas (id, location, kind, started_at, heartbeat_at, in_flight, stopping,
                          clock_offset_ms, spooled_runs)
    VALUES (:id, :location, 'agent', now(), now(), :in_flight, :stopping, :offset, :spooled)
    ON CONFLICT (id) DO UPDATE
    SET heartbeat_at = now(), in_flight = EXCLUDED.in_flight, stopping = EXCLUDED.stopping,
        location = EXCLUDED.location, kind = 'agent',
        clock_offset_ms = EXCLUDED.clock_offset_ms, spooled_runs = EXCLUDED.spooled_runs
""")


async def heartbeat(connection: AsyncConnection, agent_id: str, location: str, in_flight: int,
                    stopping: bool, clock_offset_ms: float | None, spooled: int) -> None:
    await connection.execute(AGENT_BEAT, {
        "id": agent_id, "location": location, "in_flight": in_flight, "stopping": stopping,
        "offset": clock_offset_ms, "spooled": spooled})


async def assigned(session: AsyncSession, location: str) -> Sequence[tuple[Probe, Endpoint]]:
    """The enabled probes that list `location`, each with its endpoint (its RAG endpoints
    load with it)."""
    rows = await session.execute(
        select(Probe, Endpoint).join(Endpoint, Probe.endpoint_id == Endpoint.id)
        .where(Probe.enabled.is_(True), Probe.locations.any_() == location)
        .order_by(Probe.id))
    return [(row[0], row[1]) for row in rows]


async def keep_part(session: AsyncSession, upload_id: uuid.UUID, part: int, agent: str,
                    fleet: str, body: bytes) -> None:
    """Keep one part (a part sent again is kept once). A process of the same agent key
    (`fleet`: the prefix of that key's agent ids) sending it again takes it over: an agent
    restarted mid-upload sends its spooled run again under its new process name."""
    insert = pg_insert(AgentUploadPart).values(upload_id=upload_id, part=part, agent=agent,
                                               body=body)
    await session.execute(insert.on_conflict_do_update(
        index_elements=["upload_id", "part"],
        set_={"agent": insert.excluded.agent, "body": insert.excluded.body},
        where=func.starts_with(AgentUploadPart.agent, fleet)))


async def waiting_parts(session: AsyncSession, fleet: str) -> int:
    """Parts kept for the processes of one agent key (`fleet`), waiting for the rest."""
    return int(await session.scalar(select(func.count()).select_from(AgentUploadPart).where(
        func.starts_with(AgentUploadPart.agent, fleet))) or 0)


async def parts(session: AsyncSession, upload_id: uuid.UUID, agent: str
                ) -> dict[int, bytes]:
    """The parts of an upload received so far from `agent`, by number."""
    rows = await session.execute(
        select(AgentUploadPart.part, AgentUploadPart.body)
        .where(AgentUploadPart.upload_id == upload_id, AgentUploadPart.agent == agent))
    return {int(p): bytes(b) for p, b in rows}


async def forget_parts(session: AsyncSession, upload_id: uuid.UUID) -> None:
    await session.execute(delete(AgentUploadPart).where(AgentUploadPart.upload_id == upload_id))


async def run_of_upload(session: AsyncSession, upload_id: uuid.UUID) -> int | None:
    """The run an upload stored, if it did."""
    return await session.scalar(select(Run.id).where(Run.upload_id == upload_id))


CANCELLED_OR_GONE = text("""
    SELECT m.id FROM unnest(CAST(:ids AS bigint[])) AS m(id)
    LEFT JOIN runs r ON r.id = m.id
    WHERE r.id IS NULL OR (r.claimed_by = :agent AND r.cancel_requested_at IS NOT NULL)
""")


async def cancelled(connection: AsyncConnection, agent_id: str, run_ids: Sequence[int]
                    ) -> list[int]:
    """Of `run_ids` (runs the agent measures), those to stop: a cancel was asked for, or the
    run is gone (its probe was deleted)."""
    if not run_ids:
        return []
    rows = await connection.execute(CANCELLED_OR_GONE, {"ids": list(run_ids),
                                                        "agent": agent_id})
    return sorted(int(r[0]) for r in rows)


async def forget_stale_parts(connection: AsyncConnection, older_than_s: float) -> int:
    """Drop parts of uploads that never completed (their agent gave up or was reset)."""
    result = await connection.execute(text(
        "DELETE FROM agent_upload_parts WHERE created_at < now() - make_interval(secs => :s)"),
        {"s": older_than_s})
    return int(result.rowcount)
