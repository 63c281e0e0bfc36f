"""What the endpoint-down and no-data alerts need from the runs table, per enabled probe: its
newest finished runs' outcomes and when it last ran."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.evaluation.candidates import ProbeHealth
from sustain.service.evaluation.capacity_drop import CapacityHistory

_HEALTH = text("""
SELECT p.id, p.name, p.interval_seconds, p.cron, p.jitter_seconds,
       GREATEST(p.schedule_since, p.created_at) AS watched_since,
       (SELECT r.started_at FROM runs r
        WHERE r.probe_id = p.id AND r.started_at IS NOT NULL
        ORDER BY r.scheduled_for DESC LIMIT 1) AS last_started_at,
       count(f.status) AS recent_runs,
       count(f.status) FILTER (WHERE f.status = 'failed' OR coalesce(f.successes, 0) = 0)
           AS recent_failed
FROM probes p
LEFT JOIN LATERAL (
    SELECT r.status, r.successes FROM runs r
    WHERE r.probe_id = p.id AND r.status IN ('succeeded', 'failed')
    ORDER BY r.scheduled_for DESC LIMIT :n) f ON true
WHERE p.enabled
GROUP BY p.id
ORDER BY p.id
""")


async def probe_health(session: AsyncSession, last_n: int) -> list[ProbeHealth]:
    rows = await session.execute(_HEALTH, {"n": last_n})
    return [ProbeHealth(r.id, r.name, r.interval_seconds, r.watched_since, r.last_started_at,
                        r.recent_runs, r.recent_failed, r.cron, r.jitter_seconds)
            for r in rows]


_CAPACITY = text("""
SELECT p.name, r.unit, r.capacity
FROM probes p
CROSS JOIN LATERAL (
    SELECT r.capacity, r.summary #>> '{capacity,unit}' AS unit, r.scheduled_for FROM runs r
    WHERE r.probe_id = p.id AND r.status IN ('succeeded', 'failed') AND r.summary ? 'capacity'
      AND r.summary -> 'capacity' <> 'null'::jsonb
    ORDER BY r.scheduled_for DESC LIMIT :n) r
WHERE p.enabled
ORDER BY p.id, r.scheduled_for DESC
""")


async def capacity_histories(session: AsyncSession, last_n: int) -> list[CapacityHistory]:
    """Each enabled capacity probe's newest `last_n` capacities, newest first."""
    grouped: dict[str, tuple[str, list[int | None]]] = {}
    for row in await session.execute(_CAPACITY, {"n": last_n}):
        grouped.setdefault(row.name, (row.unit or "concurrency", []))[1].append(row.capacity)
    return [CapacityHistory(name, unit, tuple(values))
            for name, (unit, values) in grouped.items()]
