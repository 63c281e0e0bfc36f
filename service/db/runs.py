"""Run queries: creating and claiming runs (run now, scheduled ticks, ticks measured while the
database was away), recording missed and duplicate ticks, starting, cancelling and listing
runs, the newest finished run per probe, and a run's server telemetry and capacity series.
Sample queries live in service/db/samples.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from sustain.service.db.models import FINAL_RUN_STATUSES, Endpoint, Probe, Run, RunServerSeries
from sustain.service.errors import ConflictError, NotFoundError
from sustain.service.runs import summary_record as summaries


def _now() -> datetime:
    return datetime.now(UTC)


async def get(session: AsyncSession, run_id: int) -> Run:
    run = await session.get(Run, run_id)
    if run is None:
        raise NotFoundError("run", run_id)
    return run


async def create_manual(session: AsyncSession, probe_id: int, location: str) -> Run:
    """A run-now request, measured by the replica that took it, from its location."""
    run = Run(probe_id=probe_id, trigger="manual", scheduled_for=_now(), status="pending",
              location=location)
    session.add(run)
    await session.flush()
    await session.refresh(run)
    return run


CLAIM_TICK = text("""
    INSERT INTO runs (probe_id, location, trigger, scheduled_for, status, claimed_by,
                      started_at, finished_at, error)
    SELECT :probe_id, :location, 'schedule', :tick,
           CASE WHEN busy THEN 'skipped' ELSE 'running' END, :replica,
           CASE WHEN busy THEN NULL ELSE now() END, CASE WHEN busy THEN now() END,
           CASE WHEN busy THEN 'the previous run of the probe was still going' END
    FROM (SELECT EXISTS (
        SELECT 1 FROM runs WHERE probe_id = :probe_id AND location = :location
        AND status IN ('pending', 'running') AND id <> ALL(CAST(:ended AS bigint[]))
    ) AS busy) AS previous
    ON CONFLICT (probe_id, location, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
    RETURNING id, status
""")


PROBE_LOCK = text(
    "SELECT pg_advisory_xact_lock(1937012083, CAST(:probe_id % 2147483647 AS integer))")
"""Serialises claims and run-now requests of one probe (namespace 'sust')."""


async def lock_probe(session: AsyncSession, probe_id: int) -> None:
    await session.execute(PROBE_LOCK, {"probe_id": probe_id})


async def busy(session: AsyncSession, probe_id: int, location: str) -> bool:
    """Whether a run of the probe is pending or running in the location (runs of a probe
    never overlap in one location; each location's are its own)."""
    return bool((await session.execute(text(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE probe_id = :p AND location = :l "
        "AND status IN ('pending', 'running'))"), {"p": probe_id, "l": location})
    ).scalar_one())


@dataclass(frozen=True, slots=True)
class Claim:
    run_id: int
    skipped: bool
    """The tick was recorded as skipped: a run of the probe was still pending or running."""


async def claim_scheduled(
    session: AsyncSession, probe_id: int, scheduled_for: datetime, replica: str,
    location: str, ended: Sequence[int] = (),
) -> Claim | None:
    """Atomically take one tick in one location (a per-probe advisory lock makes the busy
    check and the insert one step against other claims and run-now): a run already
    `running` on this replica, or a `skipped` record when a run of the probe is still in
    flight in that location (runs of a probe never overlap there); None when another
    replica of the location took the tick first. `ended`: runs the claimer knows have ended though
    their final record is not written yet (it waits in the claimer's write buffer, say after
    a database outage): they do not make the probe busy."""
    await lock_probe(session, probe_id)
    row = (await session.execute(CLAIM_TICK, {
        "probe_id": probe_id, "tick": scheduled_for, "replica": replica,
        "location": location, "ended": list(ended)})).first()
    return None if row is None else Claim(int(row[0]), row[1] == "skipped")


CLAIM_MEASURED = text("""
    INSERT INTO runs (probe_id, location, trigger, scheduled_for, status, claimed_by,
                      started_at)
    VALUES (:probe_id, :location, 'schedule', :tick, 'running', :replica, :started_at)
    ON CONFLICT (probe_id, location, scheduled_for) WHERE trigger = 'schedule' DO UPDATE
        SET status = 'running', claimed_by = EXCLUDED.claimed_by,
            started_at = EXCLUDED.started_at, finished_at = NULL, error = NULL
        WHERE runs.status = 'missed'
           OR (runs.claimed_by = EXCLUDED.claimed_by AND (
                   (runs.status = 'running' AND runs.started_at = EXCLUDED.started_at)
                OR (runs.status IN ('running', 'abandoned')
                    AND NOT EXISTS (SELECT 1 FROM samples s WHERE s.run_id = runs.id)
                    AND NOT EXISTS (SELECT 1 FROM sample_blocks b WHERE b.run_id = runs.id))))
    RETURNING id
""")


async def claim_measured(session: AsyncSession, probe_id: int, tick: datetime, replica: str,
                         location: str, started_at: datetime) -> int | None:
    """Store a tick this replica measured while the database was unreachable: a new
    `running` run to receive its samples and final record, the tick's `missed` record taken
    over (no replica could start it: this one did, offline), this very run again (an
    earlier try committed but its answer was lost), or this replica's own claim of the tick
    that holds no samples, `running` or since marked `abandoned` (the claim was committed but
    its answer was lost, so the replica measured the tick offline: that measurement is the
    tick's); None when the tick already has a run of its own (another replica measured it
    too, or this replica's claim already holds samples of another measurement)."""
    await lock_probe(session, probe_id)
    row = (await session.execute(CLAIM_MEASURED, {
        "probe_id": probe_id, "tick": tick, "replica": replica, "location": location,
        "started_at": started_at})).first()
    return None if row is None else int(row[0])


async def record_partition_duplicate(session: AsyncSession, probe_id: int, tick: datetime,
                                     replica: str, location: str, started_at: datetime,
                                     error: str) -> int:
    """Keep a second measurement of a tick as a sample-free `skipped` record (trigger
    `partition`, outside the unique claim), so that nothing measured goes unaccounted for
    and nothing is counted twice."""
    run = Run(probe_id=probe_id, trigger="partition", scheduled_for=tick, status="skipped",
              location=location, claimed_by=replica, started_at=started_at,
              finished_at=_now(), error=error)
    session.add(run)
    await session.flush()
    return int(run.id)


RECORD_MISSED = text("""
    INSERT INTO runs (probe_id, location, trigger, scheduled_for, status, finished_at, error)
    SELECT :probe_id, :location, 'schedule', tick, 'missed', now(), :reason
    FROM unnest(CAST(:ticks AS timestamptz[])) AS tick
    ON CONFLICT (probe_id, location, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
""")
MISSED_IN_TIME = "no replica started this tick in time"


def missed_reason(location: str, live: bool) -> str:
    """Why a tick of `location` never ran: nothing there was alive, or what was alive did not
    start it in time."""
    if live:
        return MISSED_IN_TIME
    return f"no live replica or agent in location {location}"


async def record_missed(session: AsyncSession, probe_id: int, location: str,
                        ticks: Sequence[datetime], reason: str = MISSED_IN_TIME) -> int:
    """Record the location's ticks that never became runs as `missed` (ticks that have a run
    there are left as they are); how many were recorded."""
    if not ticks:
        return 0
    result = await session.execute(RECORD_MISSED, {
        "probe_id": probe_id, "location": location, "ticks": list(ticks), "reason": reason})
    return int(result.rowcount)  # type: ignore[attr-defined]


async def advance_checked(session: AsyncSession, probe_id: int, until: datetime) -> None:
    """Move the probe's missed-tick watermark forward (never back)."""
    await session.execute(text(
        "UPDATE probes SET ticks_checked_until = GREATEST(ticks_checked_until, :until) "
        "WHERE id = :id"), {"id": probe_id, "until": until})


async def mark_running(session: AsyncSession, run_id: int, replica: str) -> bool:
    """Start a pending run; False when it is pending no longer (cancelled meanwhile)."""
    result = await session.execute(
        update(Run).where(Run.id == run_id, Run.status == "pending")
        .values(status="running", claimed_by=replica, started_at=_now())
        .returning(Run.id)
    )
    return result.first() is not None


CANCELLED_PENDING = "cancelled before it started"


async def request_cancel(session: AsyncSession, run_id: int) -> Run:
    """Cancel a run (under its row lock): a pending one becomes `cancelled` at once; a
    running one gets `cancel_requested_at` (kept from a first request), which the replica
    executing it watches for. ConflictError for a run already final."""
    run = (await session.execute(
        select(Run).where(Run.id == run_id).with_for_update())).scalar_one_or_none()
    if run is None:
        raise NotFoundError("run", run_id)
    if run.status in FINAL_RUN_STATUSES:
        raise ConflictError(f"run {run_id} is already {run.status}")
    now = _now()
    if run.status == "pending":
        run.status, run.finished_at, run.error = "cancelled", now, CANCELLED_PENDING
    if run.cancel_requested_at is None:
        run.cancel_requested_at = now
    await session.flush()
    return run


async def cancel_probe_runs(session: AsyncSession, probe_id: int) -> None:
    """Cancel every pending or running run of a probe (disabled, or about to be deleted), as
    `request_cancel` does."""
    await session.execute(
        update(Run).where(Run.probe_id == probe_id, Run.status == "pending")
        .values(status="cancelled", finished_at=func.now(), error=CANCELLED_PENDING,
                cancel_requested_at=func.now()))
    await session.execute(
        update(Run).where(Run.probe_id == probe_id, Run.status == "running",
                          Run.cancel_requested_at.is_(None))
        .values(cancel_requested_at=func.now()))


CANCEL_WANTED = text("""
    SELECT m.id FROM unnest(CAST(:ids AS bigint[])) AS m(id)
    LEFT JOIN runs r ON r.id = m.id
    WHERE r.id IS NULL OR r.cancel_requested_at IS NOT NULL
""")


async def cancel_wanted(connection: AsyncConnection, run_ids: Sequence[int]) -> set[int]:
    """Of `run_ids` (runs executing here), those to stop: a cancel was asked for, or the run
    is gone (its probe was deleted)."""
    if not run_ids:
        return set()
    rows = await connection.execute(CANCEL_WANTED, {"ids": list(run_ids)})
    return {int(r[0]) for r in rows}


async def list_runs(
    session: AsyncSession, *, probe_id: int | None, status: str | None,
    start: datetime | None, end: datetime | None, before_id: int | None, limit: int,
    location: str | None = None,
) -> Sequence[Run]:
    """Newest first (by id); `start`/`end` bound scheduled_for, `before_id` continues a page."""
    query = select(Run).order_by(Run.id.desc()).limit(limit)
    if probe_id is not None:
        query = query.where(Run.probe_id == probe_id)
    if location is not None:
        query = query.where(Run.location == location)
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
    location: str
    status: str
    finished_at: datetime
    summary: dict[str, Any] | None
    series_names: tuple[str, ...] = ()
    """Its endpoint's `metrics_names`: the server series it may report besides the built-in
    ones (no other name becomes a label)."""


async def last_finished_per_probe(session: AsyncSession) -> list[LastRun]:
    """The newest finished run of each probe in each location it ran from."""
    query = (
        select(Probe.name, Endpoint.name, Endpoint.model, Run.location, Run.status,
               Run.finished_at, Run.summary_json, Run.summary_record, Endpoint.metrics_names)
        .join(Probe, Run.probe_id == Probe.id)
        .join(Endpoint, Probe.endpoint_id == Endpoint.id)
        .where(Run.finished_at.is_not(None))
        .ext(distinct_on(Run.probe_id, Run.location))
        .order_by(Run.probe_id, Run.location, Run.finished_at.desc())
    )
    return [
        LastRun(probe=p, endpoint=e, model=m, location=loc, status=s, finished_at=f,
                summary=summaries.whole(summary, record),
                series_names=tuple(str(n) for n in names or ()))
        for p, e, m, loc, s, f, summary, record, names in (await session.execute(query)).all()
        if f is not None
    ]


async def server_series(session: AsyncSession, run_id: int, limit: int,
                        after: str | None = None) -> list[RunServerSeries]:
    """The server telemetry a run kept, series by name: at most `limit`, those named after
    `after`."""
    query = select(RunServerSeries).where(RunServerSeries.run_id == run_id)
    if after is not None:
        query = query.where(RunServerSeries.name > after)
    rows = await session.scalars(query.order_by(RunServerSeries.name).limit(limit))
    return list(rows)


async def capacity_series(session: AsyncSession, probe_id: int, start: datetime,
                          end: datetime, limit: int, location: str | None = None
                          ) -> list[tuple[int, datetime, Any, Any, str]]:
    """A capacity probe's finished runs scheduled in [start, end) (in one location, or in
    all), oldest first: (run id, scheduled_for, capacity, system tps at capacity, location),
    at most `limit` (the newest)."""
    rows = await session.execute(
        select(Run.id, Run.scheduled_for, Run.capacity, Run.capacity_tps, Run.location)
        .where(Run.probe_id == probe_id, Run.status.in_(("succeeded", "failed")),
               *([] if location is None else [Run.location == location]),
               Run.scheduled_for >= start, Run.scheduled_for < end,
               func.jsonb_typeof(Run.summary["capacity"]) == "object")
        .order_by(Run.scheduled_for.desc()).limit(limit))
    return [(r[0], r[1], r[2], r[3], r[4]) for r in reversed(rows.all())]
