"""What the status page reads: every probe with its endpoint and newest finished run, and the
alerts that are pending or firing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession

from service.db.models import AlertRow, Endpoint, Probe, Run


@dataclass(frozen=True, slots=True)
class ProbeRow:
    id: int
    name: str
    endpoint: str
    model: str
    enabled: bool
    interval_s: int
    cron: str | None
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class LatestRun:
    id: int
    status: str
    scheduled_for: datetime
    finished_at: datetime | None


async def probes(session: AsyncSession) -> list[ProbeRow]:
    rows = await session.execute(
        select(Probe.id, Probe.name, Endpoint.name, Endpoint.model, Probe.enabled,
               Probe.interval_seconds, Probe.cron, Probe.labels)
        .join(Endpoint, Probe.endpoint_id == Endpoint.id).order_by(Probe.name))
    return [ProbeRow(*row) for row in rows.all()]


async def latest_runs(session: AsyncSession) -> dict[int, LatestRun]:
    """Each probe's newest run that has finished (any outcome but missed or skipped)."""
    rows = await session.execute(
        select(Run.probe_id, Run.id, Run.status, Run.scheduled_for, Run.finished_at)
        .where(Run.finished_at.is_not(None), Run.status.not_in(("missed", "skipped")))
        .ext(distinct_on(Run.probe_id)).order_by(Run.probe_id, Run.scheduled_for.desc()))
    return {probe_id: LatestRun(run_id, status, scheduled_for, finished_at)
            for probe_id, run_id, status, scheduled_for, finished_at in rows.all()}


async def active_alerts(session: AsyncSession) -> Sequence[AlertRow]:
    return (await session.execute(
        select(AlertRow).where(AlertRow.state.in_(("firing", "pending")))
        .order_by(AlertRow.state, AlertRow.severity, AlertRow.alertname))).scalars().all()
