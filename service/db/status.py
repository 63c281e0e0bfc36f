"""What the status page reads: every probe with its endpoint and newest finished run, and the
alerts that are pending or firing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

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
    cache_hit_ratio: float | None = None
    quality: dict[str, Any] | None = None
    """The run's canaries: {checked, passed}."""
    sessions: dict[str, Any] | None = None
    """A sessions run's {conversations, completed, turns, failed_turns}."""
    queue_max: float | None = None
    """Most requests waiting at the server during the run (its metrics_url)."""
    capacity: dict[str, Any] | None = None
    """A capacity run's {unit, max_passing, ...} (points left out)."""
    efficiency: dict[str, Any] | None = None
    """The run's efficiency under its endpoint's deployment."""


async def probes(session: AsyncSession) -> list[ProbeRow]:
    rows = await session.execute(
        select(Probe.id, Probe.name, Endpoint.name, Endpoint.model, Probe.enabled,
               Probe.interval_seconds, Probe.cron, Probe.labels)
        .join(Endpoint, Probe.endpoint_id == Endpoint.id).order_by(Probe.name))
    return [ProbeRow(*row) for row in rows.all()]


_LATEST = text("""
SELECT p.id AS probe_id, r.id, r.status, r.scheduled_for, r.finished_at,
       r.summary -> 'cache_hit_ratio' AS cache_hit_ratio, r.summary -> 'quality' AS quality,
       r.summary -> 'sessions' AS sessions,
       r.summary #> '{server_metrics,waiting,max}' AS queue_max,
       CASE WHEN jsonb_typeof(r.summary -> 'capacity') = 'object'
            THEN (r.summary -> 'capacity') - 'points' END AS capacity,
       r.summary -> 'efficiency' AS efficiency
FROM probes p
CROSS JOIN LATERAL (
    SELECT id, status, scheduled_for, finished_at, summary FROM runs
    WHERE probe_id = p.id AND finished_at IS NOT NULL
      AND status NOT IN ('missed', 'skipped', 'cancelled')
    ORDER BY scheduled_for DESC LIMIT 1) r
""")


async def latest_runs(session: AsyncSession) -> dict[int, LatestRun]:
    """Each probe's newest run that has finished (any outcome but missed, skipped or
    cancelled, which say nothing of the endpoint): one backward index scan per probe, not a
    scan of every retained run."""
    rows = await session.execute(_LATEST)
    return {r.probe_id: LatestRun(r.id, r.status, r.scheduled_for, r.finished_at,
                                  _number(r.cache_hit_ratio), _object(r.quality),
                                  _object(r.sessions), _number(r.queue_max),
                                  _object(r.capacity), _object(r.efficiency))
            for r in rows}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _object(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


async def first_runs_since(session: AsyncSession, since: datetime) -> dict[int, datetime]:
    """Each probe's earliest run scheduled since `since` (for charts that start there)."""
    rows = await session.execute(text(
        "SELECT probe_id, min(scheduled_for) AS first FROM runs "
        "WHERE scheduled_for >= :since GROUP BY probe_id"), {"since": since})
    return {r.probe_id: r.first for r in rows}


async def active_alerts(session: AsyncSession) -> Sequence[AlertRow]:
    return (await session.execute(
        select(AlertRow).where(AlertRow.state.in_(("firing", "pending")))
        .order_by(AlertRow.state, AlertRow.severity, AlertRow.alertname))).scalars().all()


MAX_REPORT_SAMPLES = 100_000
"""Requests a run page's histograms read at most (the first ones recorded)."""


async def run_latencies(session: AsyncSession, run_id: int, started_at: datetime | None
                        ) -> tuple[list[float], list[float]]:
    """A run's successful requests' TTFT and E2E (ms), for its page's histograms."""
    rows = await session.execute(text(
        "SELECT ttft_ms, e2e_ms FROM samples WHERE run_id = :r AND outcome = 'success' "
        "AND (CAST(:since AS timestamptz) IS NULL OR sent_at >= CAST(:since AS timestamptz)) "
        "ORDER BY pos LIMIT :n"),
        {"r": run_id, "since": None if started_at is None else started_at - timedelta(minutes=10),
         "n": MAX_REPORT_SAMPLES})
    ttfts, e2es = [], []
    for ttft, e2e in rows:
        if ttft is not None:
            ttfts.append(float(ttft))
        e2es.append(float(e2e))
    return ttfts, e2es
