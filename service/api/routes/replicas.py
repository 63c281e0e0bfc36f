"""/api/v1/replicas: the replicas sharing this database (from their heartbeats), and this
replica's own schedule, to see that every replica follows every probe."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import func, select

from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.db.models import Replica
from sustain.service.domain.schedule import Cron, Every
from sustain.service.schemas.replicas import ReplicaRead, ScheduledJob, ThisReplica

router = APIRouter(prefix="/replicas", tags=["replicas"])


@router.get("")
async def list_replicas(session: SessionDep, state: StateDep) -> list[ReplicaRead]:
    rows = (await session.execute(select(Replica).order_by(Replica.id))).scalars().all()
    now = (await session.execute(select(func.now()))).scalar_one()
    stale_s = state.liveness.stale_s
    return [ReplicaRead(
        id=r.id, started_at=r.started_at, heartbeat_at=r.heartbeat_at, in_flight=r.in_flight,
        stopping=r.stopping, alive=(now - r.heartbeat_at).total_seconds() < stale_s)
        for r in rows]


@router.get("/self")
async def this_replica(state: StateDep) -> ThisReplica:
    jobs = []
    for probe_id, spec in state.scheduler.specs().items():
        schedule = spec.schedule
        jobs.append(ScheduledJob(
            probe_id=probe_id, probe=spec.name,
            interval_seconds=schedule.interval_s if isinstance(schedule, Every) else None,
            cron=schedule.expression if isinstance(schedule, Cron) else None,
            jitter_seconds=spec.jitter_s, next_fire_at=state.scheduler.next_run_time(probe_id)))
    return ThisReplica(id=state.executor.replica_id, stopping=state.stopping,
                       in_flight=state.executor.in_flight, jobs=jobs)
