"""/api/v1/replicas: the replicas sharing this database (from their heartbeats), and this
replica's own schedule, to see that every replica follows every probe."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import func, select

from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.paging import PageDep
from sustain.service.db.models import Replica
from sustain.service.schemas.paging import Page
from sustain.service.schemas.replicas import ReplicaRead, ScheduledJob, ThisReplica
from sustain.service.ticks.schedule import Cron, Every

router = APIRouter(prefix="/replicas", tags=["replicas"])
CURSOR_KIND = "replicas"


@router.get("")
async def list_replicas(session: SessionDep, state: StateDep,
                        paging: PageDep) -> Page[ReplicaRead]:
    """Replicas by id, a page at a time."""
    query = select(Replica).order_by(Replica.id).limit(paging.fetch)
    after = cursors.decode_key(CURSOR_KIND, paging.cursor, (str,))
    if after is not None:
        query = query.where(Replica.id > after[0])
    rows = (await session.execute(query)).scalars().all()
    now = (await session.execute(select(func.now()))).scalar_one()
    stale_s = state.liveness.stale_s
    page, following = paging.cut(rows, lambda r: cursors.encode_key(CURSOR_KIND, (r.id,)))
    return Page(items=[ReplicaRead(
        id=r.id, started_at=r.started_at, heartbeat_at=r.heartbeat_at, in_flight=r.in_flight,
        stopping=r.stopping, alive=(now - r.heartbeat_at).total_seconds() < stale_s,
        location=r.location, kind=r.kind, clock_offset_ms=r.clock_offset_ms,
        spooled_runs=r.spooled_runs)
        for r in page], next_cursor=following)


@router.get("/self")
async def this_replica(state: StateDep) -> ThisReplica:
    jobs = []
    for probe_id, spec in state.scheduler.specs().items():
        schedule = spec.schedule
        jobs.append(ScheduledJob(
            probe_id=probe_id, probe=spec.name,
            interval_s=schedule.interval_s if isinstance(schedule, Every) else None,
            cron=schedule.expression if isinstance(schedule, Cron) else None,
            jitter_s=spec.jitter_s, next_fire_at=state.scheduler.next_run_time(probe_id)))
    return ThisReplica(id=state.executor.replica_id, location=state.executor.location,
                       stopping=state.stopping,
                       in_flight=state.executor.in_flight, jobs=jobs)
