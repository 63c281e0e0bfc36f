"""Run and sample queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.db.models import Endpoint, Probe, Run
from service.errors import NotFoundError


def _now() -> datetime:
    return datetime.now(UTC)


async def get(session: AsyncSession, run_id: int) -> Run:
    run = await session.get(Run, run_id)
    if run is None:
        raise NotFoundError("run", run_id)
    return run


async def create_manual(session: AsyncSession, probe_id: int) -> Run:
    run = Run(probe_id=probe_id, trigger="manual", scheduled_for=_now(), status="pending")
    session.add(run)
    await session.flush()
    await session.refresh(run)
    return run


async def claim_scheduled(
    session: AsyncSession, probe_id: int, scheduled_for: datetime, replica: str
) -> int | None:
    """Atomically create the run of one tick; None if some replica already claimed it."""
    statement = (
        pg_insert(Run)
        .values(probe_id=probe_id, trigger="schedule", scheduled_for=scheduled_for,
                status="pending", claimed_by=replica)
        .on_conflict_do_nothing(
            index_elements=["probe_id", "scheduled_for"], index_where=text("trigger = 'schedule'")
        )
        .returning(Run.id)
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def mark_running(session: AsyncSession, run_id: int, replica: str) -> None:
    await session.execute(
        update(Run).where(Run.id == run_id)
        .values(status="running", claimed_by=replica, started_at=_now())
    )


async def list_runs(
    session: AsyncSession, *, probe_id: int | None, status: str | None,
    start: datetime | None, end: datetime | None, before_id: int | None, limit: int,
) -> Sequence[Run]:
    """Newest first (by id); `start`/`end` bound scheduled_for, `before_id` continues a page."""
    query = select(Run).order_by(Run.id.desc()).limit(limit)
    if probe_id is not None:
        query = query.where(Run.probe_id == probe_id)
    if status is not None:
        query = query.where(Run.status == status)
    if start is not None:
        query = query.where(Run.scheduled_for >= start)
    if end is not None:
        query = query.where(Run.scheduled_for < end)
    if before_id is not None:
        query = query.where(Run.id < before_id)
    return (await session.execute(query)).scalars().all()


@dataclass(frozen=True, slots=True)
class LastRun:
    """The newest finished run of a probe, for the last-run gauges."""

    probe: str
    endpoint: str
    model: str
    status: str
    finished_at: datetime
    summary: dict[str, Any] | None


async def last_finished_per_probe(session: AsyncSession) -> list[LastRun]:
    query = (
        select(Probe.name, Endpoint.name, Endpoint.model, Run.status, Run.finished_at, Run.summary)
        .join(Probe, Run.probe_id == Probe.id)
        .join(Endpoint, Probe.endpoint_id == Endpoint.id)
        .where(Run.finished_at.is_not(None))
        .ext(distinct_on(Run.probe_id))
        .order_by(Run.probe_id, Run.finished_at.desc())
    )
    return [
        LastRun(probe=p, endpoint=e, model=m, status=s, finished_at=f, summary=summary)
        for p, e, m, s, f, summary in (await session.execute(query)).all()
        if f is not None
    ]
