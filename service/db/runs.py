"""Run and sample queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from probes.measure.sample import Sample
from service.db.models import Endpoint, Probe, Run, SampleRow
from service.errors import NotFoundError

SAMPLE_BATCH = 1000


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


async def finish(
    session: AsyncSession, run_id: int, status: str, *,
    summary: dict[str, Any] | None = None, error: str | None = None,
    started_at: datetime | None = None,
) -> None:
    values: dict[str, Any] = {"status": status, "summary": summary, "error": error,
                              "finished_at": _now()}
    if started_at is not None:
        values["started_at"] = started_at
    await session.execute(update(Run).where(Run.id == run_id).values(**values))


def sample_row(run_id: int, probe_id: int, sample: Sample) -> dict[str, Any]:
    m = sample.measurement
    return {
        "run_id": run_id,
        "probe_id": probe_id,
        "seq": sample.seq,
        "stage": sample.stage,
        "sent_at": sample.sent_at,
        "t_sched_ms": sample.t_sched_ms,
        "t_send_ms": sample.t_send_ms,
        "lag_ms": sample.lag_ms,
        "ttft_ms": m.ttft_ms,
        "itl_count": len(m.itl_ms),
        "itl_mean_ms": sum(m.itl_ms) / len(m.itl_ms) if m.itl_ms else None,
        "itl_max_ms": max(m.itl_ms) if m.itl_ms else None,
        "tpot_ms": sample.tpot_ms,
        "e2e_ms": m.e2e_ms,
        "corrected_e2e_ms": sample.corrected_e2e_ms,
        "input_tokens": m.input_tokens,
        "output_tokens": m.output_tokens,
        "tokens_server_counted": m.tokens_server_counted,
        "outcome": str(sample.outcome),
        "error_class": None if m.error_class is None else str(m.error_class),
        "http_status": m.http_status,
    }


async def insert_samples(
    session: AsyncSession, run_id: int, probe_id: int, samples: Sequence[Sample]
) -> None:
    """Multi-row inserts in batches of SAMPLE_BATCH."""
    rows = [sample_row(run_id, probe_id, s) for s in samples]
    for start in range(0, len(rows), SAMPLE_BATCH):
        await session.execute(insert(SampleRow), rows[start : start + SAMPLE_BATCH])


async def list_runs(
    session: AsyncSession, *, probe_id: int | None, status: str | None, limit: int
) -> Sequence[Run]:
    """Newest first."""
    query = select(Run).order_by(Run.id.desc()).limit(limit)
    if probe_id is not None:
        query = query.where(Run.probe_id == probe_id)
    if status is not None:
        query = query.where(Run.status == status)
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
