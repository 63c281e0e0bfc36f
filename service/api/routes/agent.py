"""/api/v1/agent: what a `sustain agent` does, and all an agent key may do, for the location
its key names: heartbeat, read the probes of that location, claim their ticks, and upload
the runs it measured. Every answer is about that location only. What an upload may carry,
and how much of it may wait, is bounded (sustain.service.scheduling.agent_runs)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from sustain.service.api import cursor
from sustain.service.api.auth import Principal, current_principal
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.paging import PageDep
from sustain.service.db import agents as agent_queries
from sustain.service.db import probes as probe_queries
from sustain.service.db import replicas
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe
from sustain.service.errors import ConflictError, FieldError, NotFoundError
from sustain.service.runs.upload import UploadError
from sustain.service.scheduling import agent_runs
from sustain.service.scheduling.liveness import STALE_BEATS
from sustain.service.scheduling.scheduler import schedule_of
from sustain.service.schemas.agent import (
    AGENT_NAME_PATTERN,
    UPLOAD_PART,
    AgentBeat,
    AgentClaim,
    AgentClaimed,
    AgentHeartbeat,
    Assignment,
    Assignments,
    UploadStored,
)
from sustain.service.schemas.endpoints import EndpointRead
from sustain.service.strict_json import dumps_bytes

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


ASSIGNMENTS_CURSOR = "assignments"


def _assignments(location: str, version: str, rows: Sequence[tuple[Probe, Endpoint]],
                 next_cursor: str | None) -> bytes:
    """One page of assignments as JSON (run in a worker thread: a page of a thousand probes
    takes a while to build; every attribute it reads is loaded already)."""
    probes = [Assignment(probe=probe_queries.read(p), endpoint=EndpointRead.model_validate(e),
                         rag_embed=_endpoint(p.rag_embed_endpoint),
                         rag_rerank=_endpoint(p.rag_rerank_endpoint)) for p, e in rows]
    page = Assignments(location=location, version=version, probes=probes,
                       next_cursor=next_cursor)
    return dumps_bytes(page.model_dump(mode="json"))


@router.post("/heartbeat")
async def heartbeat(body: AgentHeartbeat, session: SessionDep, state: StateDep,
                    caller: Caller) -> AgentBeat:
    """Say the agent is alive (its runs are not abandoned while it beats), with its load,
    its spool and its clock offset; answered with the service's time, the location's other
    live replicas and agents, the assignments' version (one query over ids and update
    times: the assignments are not built) and the runs to stop. 409 for a name not live yet
    when the key already has SUSTAIN_AGENT_MAX_NAMES live ones."""
    location, me = _location(caller), agent_id(caller, body.agent)
    connection = await session.connection()
    stale_s = STALE_BEATS * state.settings.heartbeat_s
    limit = state.settings.agent_max_names
    if not await agent_queries.heartbeat(
            connection, me, agent_id(caller, ""), location, body.in_flight, body.stopping,
            body.clock_offset_ms, body.spooled_runs, max_names=limit, stale_s=stale_s):
        await session.rollback()
        raise ConflictError(
            f"key {caller.name!r} already has {limit} live agent names "
            "(SUSTAIN_AGENT_MAX_NAMES); a new name is taken once one of them has not "
            f"beaten for {stale_s:g} s")
    peers = await replicas.other_loads(connection, me, location, stale_s)
    cancelled = await agent_queries.cancelled(connection, me, body.running)
    version = await agent_queries.assigned_version(connection, location)
    await session.commit()
    return AgentBeat(server_time=datetime.now(UTC), location=location, agent_id=me,
                     peers=sorted(peers), assignments_version=version, cancelled=cancelled)


@router.get("/assignments", response_model=Assignments)
async def assignments(session: SessionDep, caller: Caller, paging: PageDep) -> Response:
    """The enabled probes that run from the agent's location, with their endpoints (secret
    references, never secrets: the agent resolves them where it runs), by probe id, a page
    at a time: follow `next_cursor` until it is null. Every page carries the version of
    all the assignments (as the heartbeat answers it), read before the page: a reader whose
    pages disagree on it reads them again."""
    location = _location(caller)
    after = cursor.decode(ASSIGNMENTS_CURSOR, paging.cursor)
    version = await agent_queries.assigned_version(await session.connection(), location)
    rows = await agent_queries.assigned(session, location, paging.fetch, after)
    page, following = paging.cut(rows, lambda r: cursor.encode(ASSIGNMENTS_CURSOR, r[0].id))
    body = await asyncio.to_thread(_assignments, location, version, page, following)
    return Response(body, media_type="application/json")


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
    "schema": UPLOAD_PART}}, "required": True}})
async def upload(request: Request, session: SessionDep, state: StateDep, caller: Caller,
                 agent: Annotated[str, Query(pattern=AGENT_NAME_PATTERN)]) -> UploadStored:
    """One part of a finished run (msgpack: upload_id, part, parts, probe_id, tick,
    run_id (null: measured without a claim), started_at, dropped, samples, and with the
    last part its final record). The run is stored whole when its last part is in; an upload
    sent again is stored once; a tick that already has a run in the location stores nothing
    more (`partition`). Each part is checked before it is kept (agent_runs, run_upload): 422
    naming the field for a sample beyond its bounds or outside the run's window, a summary
    off its schema or with names outside their closed sets, or an unclaimed tick that is not
    one of the probe's, is in the future or is older than
    SUSTAIN_AGENT_UPLOAD_MAX_AGE_S; 413 when the upload's parts come to more than
    SUSTAIN_AGENT_UPLOAD_MAX_BYTES (it is refused whole); 409 when the key's unfinished
    uploads already hold that many bytes."""
    if request.headers.get("content-type", "").split(";")[0].strip() != UPLOAD_MEDIA:
        raise FieldError("content-type", f"must be {UPLOAD_MEDIA}")
    body = await request.body()
    me = agent_id(caller, agent)
    try:
        done = await agent_runs.receive(session, body, me, agent_id(caller, ""),
                                        _location(caller),
                                        agent_runs.AgentUploadLimits.of(state.settings))
    except UploadError as exc:
        raise FieldError(f"body.{exc.field}", exc.message) from None
    await session.commit()
    return UploadStored(outcome=done.outcome, run_id=done.run_id, missing=list(done.missing),
                        detail=done.detail)
