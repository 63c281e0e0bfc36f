"""What the status page reads: every probe with its endpoint and newest finished run, and the
alerts that are pending or firing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import AlertRow, Endpoint, Probe


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


_LATEST = text("""
SELECT p.id AS probe_id, r.id, r.status, r.scheduled_for, r.finished_at
FROM probes p
CROSS JOIN LATERAL (
    SELECT id, status, scheduled_for, finished_at FROM runs
    WHERE probe_id = p.id AND finished_at IS NOT NULL
      AND status NOT IN ('missed', 'skipped', 'cancelled')
    ORDER BY scheduled_for DESC LIMIT 1) r
""")


async def latest_runs(session: AsyncSession) -> dict[int, LatestRun]:
    """Each probe's newest run that has finished (any outcome but missed, skipped or
    cancelled, which say nothing of the endpoint): one backward index scan per probe, not a
    scan of every retained run."""
    rows = await session.execute(_LATEST)
    return {r.probe_id: LatestRun(r.id, r.status, r.scheduled_for, r.finished_at)
            for r in rows}


async def active_alerts(session: AsyncSession) -> Sequence[AlertRow]:
    return (await session.execute(
        select(AlertRow).where(AlertRow.state.in_(("firing", "pending")))
        .order_by(AlertRow.state, AlertRow.severity, AlertRow.alertname))).scalars().all()
