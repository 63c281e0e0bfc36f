"""Run and sample queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import Endpoint, Probe, Run
from sustain.service.errors import NotFoundError


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


CLAIM_TICK = text("""
    INSERT INTO runs (probe_id, trigger, scheduled_for, status, claimed_by, started_at,
                      finished_at, error)
    SELECT :probe_id, 'schedule', :tick,
           CASE WHEN busy THEN 'skipped' ELSE 'running' END, :replica,
           CASE WHEN busy THEN NULL ELSE now() END, CASE WHEN busy THEN now() END,
           CASE WHEN busy THEN 'the previous run of the probe was still going' END
    FROM (SELECT EXISTS (
        SELECT 1 FROM runs WHERE probe_id = :probe_id AND status IN ('pending', 'running')
    ) AS busy) AS previous
    ON CONFLICT (probe_id, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
    RETURNING id, status
""")


PROBE_LOCK = text(
    "SELECT pg_advisory_xact_lock(1937012083, CAST(:probe_id % 2147483647 AS integer))")
"""Serialises claims and run-now requests of one probe (namespace 'sust')."""


async def lock_probe(session: AsyncSession, probe_id: int) -> None:
    await session.execute(PROBE_LOCK, {"probe_id": probe_id})


async def busy(session: AsyncSession, probe_id: int) -> bool:
    """Whether a run of the probe is pending or running anywhere."""
    return bool((await session.execute(text(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE probe_id = :p "
        "AND status IN ('pending', 'running'))"), {"p": probe_id})).scalar_one())


@dataclass(frozen=True, slots=True)
class Claim:
    run_id: int
    skipped: bool
    """The tick was recorded as skipped: a run of the probe was still pending or running."""


async def claim_scheduled(
    session: AsyncSession, probe_id: int, scheduled_for: datetime, replica: str
) -> Claim | None:
    """Atomically take one tick (a per-probe advisory lock makes the busy check and the
    insert one step against other claims and run-now): a run already `running` on this
    replica, or a `skipped` record when a
    run of the probe is still in flight anywhere (runs of a probe never overlap); None when
    another replica took the tick first."""
    await lock_probe(session, probe_id)
    row = (await session.execute(CLAIM_TICK, {
        "probe_id": probe_id, "tick": scheduled_for, "replica": replica})).first()
    return None if row is None else Claim(int(row[0]), row[1] == "skipped")


RECORD_MISSED = text("""
    INSERT INTO runs (probe_id, trigger, scheduled_for, status, finished_at, error)
    SELECT :probe_id, 'schedule', tick, 'missed', now(),
           'no replica started this tick in time'
    FROM unnest(CAST(:ticks AS timestamptz[])) AS tick
    ON CONFLICT (probe_id, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
""")


async def record_missed(session: AsyncSession, probe_id: int, ticks: Sequence[datetime]
                        ) -> int:
    """Record ticks that never became runs as `missed` (ticks that have a run are left as
    they are); how many were recorded."""
    if not ticks:
        return 0
    result = await session.execute(RECORD_MISSED, {"probe_id": probe_id, "ticks": list(ticks)})
    return int(result.rowcount)  # type: ignore[attr-defined]


async def advance_checked(session: AsyncSession, probe_id: int, until: datetime) -> None:
    """Move the probe's missed-tick watermark forward (never back)."""
    await session.execute(text(
        "UPDATE probes SET ticks_checked_until = GREATEST(ticks_checked_until, :until) "
        "WHERE id = :id"), {"id": probe_id, "until": until})


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
