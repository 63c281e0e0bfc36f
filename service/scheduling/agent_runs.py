"""Storing the runs agents upload: each whole, in one transaction, once.

An agent uploads a finished run in parts (samples), the last with its final record. The
parts wait in `agent_upload_parts`; when the last one is in and none is missing, the run is
stored as a replica's offline run is (offline.store_whole): a run the agent claimed through
the API gets its samples and final record (also when the service marked it `abandoned`
because the agent's heartbeat went stale during an outage: it was measured, and nothing else
was stored for it); a tick the agent measured without a claim (the service was unreachable)
is claimed now (runs.claim_measured), or kept as a sample-free `skipped` record when that
location's tick already has a run. The stored run is marked with the upload's id, so an
upload sent again finds it and stores nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import msgpack
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure.sample import Sample
from sustain.service.db import agents as agent_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Probe, Run
from sustain.service.domain.run_upload import (
    MAX_PARTS,
    UploadError,
    decode_final,
    decode_samples,
    epoch_time,
)
from sustain.service.errors import ConflictError
from sustain.service.ingest.store import Stored
from sustain.service.scheduling.offline import HeldRun, duplicate_error, store_whole

MAX_WAITING_PARTS = MAX_PARTS
"""Parts one agent key may leave waiting for the rest of their uploads (an agent uploads one
run at a time, so one upload's parts at most; older unfinished ones are dropped after a day
by the hourly maintenance): a bound on what a key can make the service keep."""


@dataclass(frozen=True, slots=True)
class Part:
    """One part as it arrived: who sent it, which run it belongs to, its samples."""

    upload_id: uuid.UUID
    part: int
    parts: int
    probe_id: int
    tick: datetime
    run_id: int | None
    started_at: datetime
    dropped: int
    samples: list[Sample]
    final: object
    """The final record (the last part only)."""


def _int(data: dict[str, object], name: str, low: int, high: int) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UploadError(name, f"a whole number from {low} to {high}")
    return value


def decode_part(body: bytes) -> Part:
    """A part from its msgpack body; UploadError naming the field that is wrong."""
    try:
        data = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException, TypeError):
        raise UploadError("body", "not a msgpack map") from None
    if not isinstance(data, dict):
        raise UploadError("body", "not a msgpack map")
    try:
        upload_id = uuid.UUID(str(data.get("upload_id")))
    except ValueError:
        raise UploadError("upload_id", "a UUID") from None
    parts = _int(data, "parts", 1, MAX_PARTS)
    part = _int(data, "part", 0, parts - 1)
    run_id = data.get("run_id")
    if run_id is not None:
        run_id = _int(data, "run_id", 1, 2**63 - 1)
    final = data.get("final")
    if (part == parts - 1) != (final is not None):
        raise UploadError("final", "comes with the last part, and only with it")
    return Part(upload_id=upload_id, part=part, parts=parts,
                probe_id=_int(data, "probe_id", 1, 2**63 - 1),
                tick=epoch_time(data.get("tick"), "tick"), run_id=run_id,
                started_at=epoch_time(data.get("started_at"), "started_at"),
                dropped=_int(data, "dropped", 0, 2**31 - 1),
                samples=decode_samples(data.get("samples")), final=final)


@dataclass(frozen=True, slots=True)
class Outcome:
    outcome: str
    run_id: int | None = None
    missing: tuple[int, ...] = ()
    detail: str | None = None
    stored: Stored | None = None


async def receive(session: AsyncSession, body: bytes, agent_id: str, fleet: str,
                  location: str) -> Outcome:
    """Take one part: keep it, and when it completes its upload, store the whole run (the
    caller commits). UploadError for a part that is not one; ConflictError when the agent's
    key already has MAX_WAITING_PARTS parts waiting."""
    part = decode_part(body)
    await run_queries.lock_probe(session, part.probe_id)
    done = await agent_queries.run_of_upload(session, part.upload_id)
    if done is not None:
        return Outcome("duplicate", done)
    if part.parts > 1 and \
            await agent_queries.waiting_parts(session, fleet) >= MAX_WAITING_PARTS:
        raise ConflictError(
            f"{MAX_WAITING_PARTS} parts of unfinished uploads wait for this agent key; "
            "finish an upload (send its remaining parts) before starting another")
    await agent_queries.keep_part(session, part.upload_id, part.part, agent_id, fleet, body)
    if part.final is None:
        return Outcome("part")
    have = await agent_queries.parts(session, part.upload_id, agent_id)
    missing = tuple(n for n in range(part.parts) if n not in have)
    if missing:
        return Outcome("part", missing=missing[:100])
    samples = [s for n in range(part.parts) for s in
               (part.samples if n == part.part else decode_part(have[n]).samples)]
    outcome = await _store(session, part, samples, agent_id, location)
    await agent_queries.forget_parts(session, part.upload_id)
    return outcome


async def _store(session: AsyncSession, part: Part, samples: list[Sample], agent_id: str,
                 location: str) -> Outcome:
    probe = await session.get(Probe, part.probe_id)
    if probe is None or location not in probe.locations:
        return Outcome("dropped", detail=f"probe {part.probe_id} is gone, or no longer runs "
                       f"from location {location}")
    if part.run_id is None:
        run_id = await run_queries.claim_measured(session, part.probe_id, part.tick, agent_id,
                                                  location, part.started_at)
        if run_id is None:
            duplicate = await run_queries.record_partition_duplicate(
                session, part.probe_id, part.tick, agent_id, location, part.started_at,
                duplicate_error(agent_id, len(samples) + part.dropped))
            await _mark(session, duplicate, part.upload_id)
            return Outcome("partition", duplicate)
    else:
        run = (await session.execute(select(Run).where(Run.id == part.run_id)
                                     .with_for_update())).scalar_one_or_none()
        if run is None or run.probe_id != part.probe_id or run.claimed_by != agent_id \
                or run.location != location:
            return Outcome("dropped", detail=f"run {part.run_id} is not this agent's")
        if run.status == "abandoned":  # the agent's heartbeat went stale: it measured on
            run.status, run.finished_at, run.error = "running", None, None
            await session.flush()
        elif run.status != "running":
            return Outcome("dropped", part.run_id, detail=f"run {part.run_id} is already "
                           f"{run.status}")
        run_id = run.id
    final = decode_final(part.final, run_id, part.probe_id, part.tick, part.dropped)
    held = HeldRun(part.probe_id, part.tick, part.started_at, samples, part.dropped, final)
    stored = await store_whole(await session.connection(), run_id, held)
    await _mark(session, run_id, part.upload_id)
    return Outcome("stored", run_id, stored=stored)


async def _mark(session: AsyncSession, run_id: int, upload_id: uuid.UUID) -> None:
    await session.execute(update(Run).where(Run.id == run_id).values(upload_id=upload_id))
