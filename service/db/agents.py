"""What the service stores for its agents: their heartbeats (rows of `replicas`, kind
`agent`), the probes of their location, and the parts of the runs they upload until the
whole run can be stored."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import ColumnElement, and_, delete, func, select, text
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

OF_KEY = ("starts_with(id, :fleet) "
          "AND strpos(substr(id, char_length(:fleet) + 1), ':') = 0")
"""The rows of one agent key's processes: ids `{fleet}{agent name}`, where `fleet` is
`agent:{key name}:`. An agent name has no `:`, so the rest must have none either: a key
named `a` never counts the processes of an (old) key named `a:b`."""

FLEET_LOCK = 0x4147_4E54  # "AGNT": with the fleet's hash, one admission per key at a time

FLEET_NAMES = text(f"""
    SELECT count(*) FILTER (WHERE id <> :id
                              AND heartbeat_at >= now() - make_interval(secs => :stale)),
           coalesce(bool_or(id = :id AND heartbeat_at >= now() - make_interval(secs => :stale)),
                    false)
    FROM replicas WHERE kind = 'agent' AND {OF_KEY}
""")

FORGET_STALE_NAMES = text(f"""
    DELETE FROM replicas
    WHERE kind = 'agent' AND id <> :id AND {OF_KEY}
      AND heartbeat_at < now() - make_interval(secs => :stale)
""")


def of_key(column: ColumnElement[str], fleet: str) -> ColumnElement[bool]:
    """`column` (an agent id) belongs to a process of the agent key whose ids start with
    `fleet` (`agent:{key name}:`), and not to a key whose name merely starts with the same
    characters (see OF_KEY)."""
    rest = func.substr(column, len(fleet) + 1)
    return and_(func.starts_with(column, fleet), func.strpos(rest, ":") == 0)


async def heartbeat(connection: AsyncConnection, agent_id: str, fleet: str, location: str,
                    in_flight: int, stopping: bool, clock_offset_ms: float | None,
                    spooled: int, *, max_names: int, stale_s: float) -> bool:
    """Record one heartbeat of `agent_id`, a process of the agent key `fleet`; False (and
    nothing written) when it is a name that is not live yet and the key already has
    `max_names` live ones (live: beat within `stale_s` seconds). A name admitted anew takes
    the place of the key's stale ones (their rows go), so the key never holds more than
    `max_names` rows. Admissions of one key take turns (a transaction lock); a live name, and
    a refusal, need no turn."""
    names = {"id": agent_id, "fleet": fleet, "stale": stale_s}
    live, me_live = (await connection.execute(FLEET_NAMES, names)).one()
    if not me_live:
        if int(live) >= max_names:
            return False
        await connection.execute(text("SELECT pg_advisory_xact_lock(:ns, hashtext(:fleet))"),
                                 {"ns": FLEET_LOCK, "fleet": fleet})
        live, me_live = (await connection.execute(FLEET_NAMES, names)).one()
        if not me_live and int(live) >= max_names:
            return False
        await connection.execute(FORGET_STALE_NAMES, names)
    await connection.execute(AGENT_BEAT, {
        "id": agent_id, "location": location, "in_flight": in_flight, "stopping": stopping,
        "offset": clock_offset_ms, "spooled": spooled})
    return True


def _assigned(location: str) -> ColumnElement[bool]:
    return and_(Probe.enabled.is_(True), Probe.locations.any_() == location)


async def assigned(session: AsyncSession, location: str, limit: int | None = None,
                   after: int | None = None) -> Sequence[tuple[Probe, Endpoint]]:
    """The enabled probes that list `location`, by id (those after probe `after`, at most
    `limit`), each with its endpoint (its RAG endpoints load with it)."""
    query = (select(Probe, Endpoint).join(Endpoint, Probe.endpoint_id == Endpoint.id)
             .where(_assigned(location)).order_by(Probe.id))
    if after is not None:
        query = query.where(Probe.id > after)
    if limit is not None:
        query = query.limit(limit)
    rows = await session.execute(query)
    return [(row[0], row[1]) for row in rows]


ASSIGNED_VERSION = text("""
    SELECT count(*), coalesce(md5(string_agg(concat_ws(',', p.id, p.updated_at, e.id,
                                                      e.updated_at, re.id, re.updated_at,
                                                      rr.id, rr.updated_at),
                                            ';' ORDER BY p.id)), '')
    FROM probes p
    JOIN endpoints e ON e.id = p.endpoint_id
    LEFT JOIN endpoints re ON re.id = p.rag_embed_endpoint_id
    LEFT JOIN endpoints rr ON rr.id = p.rag_rerank_endpoint_id
    WHERE p.enabled AND :location = ANY(p.locations)
""")


async def assigned_version(connection: AsyncConnection, location: str) -> str:
    """A version of the location's assignments, from one query that reads ids and update
    times only (no probe is built): it changes whenever a probe is assigned or unassigned
    (created, deleted, enabled, disabled, its locations changed) or it or one of its
    endpoints is written (every write of either sets its `updated_at`)."""
    count, digest = (await connection.execute(ASSIGNED_VERSION, {"location": location})).one()
    return f"{int(count):x}-{str(digest)[:16]}"


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
        where=of_key(AgentUploadPart.agent.expression, fleet)))


UPLOAD_LOCK = 0x4155_504C  # "AUPL": with the fleet's hash, one upload part per key at a time


async def lock_uploads(session: AsyncSession, fleet: str) -> None:
    """Take the agent key's upload lock until the transaction ends: the bytes its parts
    hold are counted and a part kept as one step, so parallel parts cannot all pass the
    count. Held for a few short queries only, never while a part is decoded."""
    await session.execute(text("SELECT pg_advisory_xact_lock(:ns, hashtext(:fleet))"),
                          {"ns": UPLOAD_LOCK, "fleet": fleet})


WAITING_BYTES = text("""
    SELECT coalesce(sum(length(body)) FILTER (WHERE upload_id = :upload), 0),
           coalesce(sum(length(body)), 0)
    FROM agent_upload_parts
    WHERE starts_with(agent, :fleet)
      AND strpos(substr(agent, char_length(:fleet) + 1), ':') = 0
      AND NOT (upload_id = :upload AND part = :part)
""")


async def waiting_bytes(session: AsyncSession, upload_id: uuid.UUID, part: int, fleet: str
                        ) -> tuple[int, int]:
    """Bytes the agent key `fleet` keeps waiting, counted in the database: (those of
    `upload_id`, those of all its unfinished uploads), part `part` of `upload_id` left out
    (a part sent again replaces itself)."""
    own, total = (await session.execute(WAITING_BYTES, {
        "upload": upload_id, "part": part, "fleet": fleet})).one()
    return int(own), int(total)


async def part_numbers(session: AsyncSession, upload_id: uuid.UUID, agent: str) -> set[int]:
    """The numbers of the parts of an upload received so far from `agent` (no bodies)."""
    rows = await session.execute(
        select(AgentUploadPart.part)
        .where(AgentUploadPart.upload_id == upload_id, AgentUploadPart.agent == agent))
    return {int(p) for (p,) in rows}


async def parts(session: AsyncSession, upload_id: uuid.UUID, agent: str
                ) -> dict[int, bytes]:
    """The parts of an upload received so far from `agent`, by number."""
    rows = await session.execute(
        select(AgentUploadPart.part, AgentUploadPart.body)
        .where(AgentUploadPart.upload_id == upload_id, AgentUploadPart.agent == agent))
    return {int(p): bytes(b) for p, b in rows}


async def forget_parts(session: AsyncSession, upload_id: uuid.UUID,
                       fleet: str | None = None) -> None:
    """Drop an upload's parts (stored, or refused: it will never complete); with `fleet`,
    only those of that agent key's processes."""
    query = delete(AgentUploadPart).where(AgentUploadPart.upload_id == upload_id)
    if fleet is not None:
        query = query.where(of_key(AgentUploadPart.agent.expression, fleet))
    await session.execute(query)


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
