"""/api/v1/agent: what a `sustain agent` does, and all an agent key may do, for the location
its key names: heartbeat, read the probes of that location, claim their ticks, and upload
the runs it measured. Every answer is about that location only."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from sustain.service.api.auth import Principal, current_principal
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.db import agents as agent_queries
from sustain.service.db import probes as probe_queries
from sustain.service.db import replicas
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe
from sustain.service.domain.run_upload import UploadError
from sustain.service.errors import FieldError, NotFoundError
from sustain.service.scheduling import agent_runs
from sustain.service.scheduling.liveness import STALE_BEATS
from sustain.service.scheduling.scheduler import schedule_of
from sustain.service.schemas.agent import (
    AGENT_NAME_PATTERN,
    AgentBeat,
    AgentClaim,
    AgentClaimed,
    AgentHeartbeat,
    Assignment,
    Assignments,
    UploadStored,
)
from sustain.service.schemas.endpoints import EndpointRead

router = APIRouter(prefix="/agent", tags=["agent"])

UPLOAD_MEDIA = "application/msgpack"
CLAIM_LATE_S = 3600
"""How late a claim may come after its tick: an agent claims at the tick (plus jitter)."""
CLAIM_EARLY_S = 5
"""How early (clocks differ a little)."""

Caller = Annotated[Principal, Depends(current_principal)]


def agent_id(caller: Principal, agent: str) -> str:
    """What the agent's runs are claimed by: its key's name and its process."""
    return f"agent:{caller.name}:{agent}"


def _location(caller: Principal) -> str:
    assert caller.location is not None, "an agent key has a location"
    return caller.location


def _endpoint(row: Endpoint | None) -> EndpointRead | None:
    return None if row is None else EndpointRead.model_validate(row)


async def _assignments(session: SessionDep, location: str) -> Assignments:
    probes = [Assignment(probe=probe_queries.read(p), endpoint=EndpointRead.model_validate(e),
                         rag_embed=_endpoint(p.rag_embed_endpoint),
                         rag_rerank=_endpoint(p.rag_rerank_endpoint))
              for p, e in await agent_queries.assigned(session, location)]
    text = "".join(a.model_dump_json() for a in probes)
    version = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Assignments(location=location, version=version, probes=probes)


@router.post("/heartbeat")
async def heartbeat(body: AgentHeartbeat, session: SessionDep, state: StateDep,
                    caller: Caller) -> AgentBeat:
    """Say the agent is alive (its runs are not abandoned while it beats), with its load,
    its spool and its clock offset; answered with the service's time, the location's other
    live replicas and agents, the assignments' version and the runs to stop."""
    location, me = _location(caller), agent_id(caller, body.agent)
    connection = await session.connection()
    await agent_queries.heartbeat(connection, me, location, body.in_flight, body.stopping,
                                  body.clock_offset_ms, body.spooled_runs)
    stale_s = STALE_BEATS * state.settings.heartbeat_seconds
    peers = await replicas.other_loads(connection, me, location, stale_s)
    cancelled = await agent_queries.cancelled(connection, me, body.running)
    version = (await _assignments(session, location)).version
    await session.commit()
    return AgentBeat(server_time=datetime.now(UTC), location=location, agent_id=me,
                     peers=sorted(peers), assignments_version=version, cancelled=cancelled)


@router.get("/assignments")
async def assignments(session: SessionDep, caller: Caller) -> Assignments:
    """The enabled probes that run from the agent's location, with their endpoints (secret
    references, never secrets: the agent resolves them where it runs)."""
    return await _assignments(session, _location(caller))


@router.post("/claims")
async def claim(body: AgentClaim, session: SessionDep, caller: Caller) -> AgentClaimed:
    """Claim one tick of a probe in the agent's location, exactly as a replica there would:
    `running` with the run to measure, `skipped` (the location's previous run of the probe
    is still going) or `taken` (another replica or agent claimed it). 404 for a probe that
    is not enabled in this location; 422 for a time that is not one of its ticks."""
    location, me = _location(caller), agent_id(caller, body.agent)
    probe = await session.get(Probe, body.probe_id)
    if probe is None or not probe.enabled or location not in probe.locations:
        raise NotFoundError("probe", body.probe_id)
    schedule = schedule_of(probe)
    now = datetime.now(UTC)
    if schedule.next_after(body.tick - timedelta(microseconds=1)) != body.tick:
        raise FieldError("tick", "not a tick of the probe's schedule")
    if not now - timedelta(seconds=CLAIM_LATE_S) <= body.tick \
            <= now + timedelta(seconds=CLAIM_EARLY_S):
        raise FieldError("tick", f"must be within the last {CLAIM_LATE_S} s")
    found = await run_queries.claim_scheduled(session, body.probe_id, body.tick, me, location,
                                              body.ended)
    await session.commit()
    if found is None:
        return AgentClaimed(status="taken")
    return AgentClaimed(status="skipped" if found.skipped else "running", run_id=found.run_id)


@router.post("/uploads", openapi_extra={"requestBody": {"content": {UPLOAD_MEDIA: {
    "schema": {"type": "string", "format": "binary"}}}, "required": True}})
async def upload(request: Request, session: SessionDep, caller: Caller,
                 agent: Annotated[str, Query(pattern=AGENT_NAME_PATTERN)]) -> UploadStored:
    """One part of a finished run (msgpack: upload_id, part, parts, probe_id, tick,
    run_id (null: measured without a claim), started_at, dropped, samples, and with the
    last part its final record). The run is stored whole when its last part is in; an upload
    sent again is stored once. 409 when the key's unfinished uploads already hold
    MAX_WAITING_PARTS parts."""
    if request.headers.get("content-type", "").split(";")[0].strip() != UPLOAD_MEDIA:
        raise FieldError("content-type", f"must be {UPLOAD_MEDIA}")
    body = await request.body()
    me = agent_id(caller, agent)
    try:
        done = await agent_runs.receive(session, body, me, agent_id(caller, ""),
                                        _location(caller))
    except UploadError as exc:
        raise FieldError(f"body.{exc.field}", exc.message) from None
    await session.commit()
    return UploadStored(outcome=done.outcome, run_id=done.run_id, missing=list(done.missing),
                        detail=done.detail)
