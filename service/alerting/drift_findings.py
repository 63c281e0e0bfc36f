"""Drift findings: every drift_evaluation_seconds one replica (an advisory lock decides which)
compares each enabled probe's recent window with the baseline window before it, for each
watched metric statistic, and stores the verdict. sustain_drift_ratio and the SustainDrift
alert read the stored findings, so a scrape or an evaluation pass never recomputes them."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sustain.probes.measure.run_sketches import METRICS
from sustain.service.db import drift as drift_queries
from sustain.service.db.models import Probe
from sustain.service.evaluation.drift import detect
from sustain.service.history.aggregate import LATENCY_STATS

DRIFT_LOCK_KEY = 0x5375_7374_0003


def parse_watched(spec: str) -> list[tuple[str, str]]:
    """`ttft:p99,e2e:p99` as (metric, stat) pairs; ValueError naming a bad pair."""
    pairs: list[tuple[str, str]] = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        metric, _, stat = item.partition(":")
        if metric not in METRICS or stat not in LATENCY_STATS:
            raise ValueError(f"drift_metrics: {item!r} is not metric:stat with metric one of "
                             f"{', '.join(METRICS)} and stat one of "
                             f"{', '.join(sorted(LATENCY_STATS))}")
        pairs.append((metric, stat))
    return pairs


async def refresh(sessions: async_sessionmaker[AsyncSession], now: datetime,
                  window: timedelta, baseline: timedelta, watched: list[tuple[str, str]],
                  every: timedelta) -> bool:
    """Recompute every finding if none was computed within `every`; whether this call did."""
    async with sessions.begin() as session:
        locked = (await session.execute(text("SELECT pg_try_advisory_xact_lock(:key)"),
                                        {"key": DRIFT_LOCK_KEY})).scalar()
        if not locked:
            return False
        last = await drift_queries.last_evaluated(session)
        if last is not None and now - last < every:
            return False
        probe_ids = (await session.execute(
            select(Probe.id).where(Probe.enabled).order_by(Probe.id))).scalars().all()
        for probe_id in probe_ids:
            for metric, stat in watched:
                await _refresh_one(session, probe_id, metric, stat, now, window, baseline)
    return True


async def _refresh_one(session: AsyncSession, probe_id: int, metric: str, stat: str,
                       now: datetime, window: timedelta, baseline: timedelta) -> None:
    start = now - window
    before, _ = await drift_queries.run_values(session, probe_id, metric, stat,
                                               start - baseline, start)
    recent, _ = await drift_queries.run_values(session, probe_id, metric, stat, start, now)
    report = await asyncio.to_thread(detect, [v.value for v in before],
                                     [v.value for v in recent])
    combined = [*before, *recent]
    change_at = None
    if report.change_index is not None and report.change_index < len(combined):
        change_at = combined[report.change_index].scheduled_for
    await drift_queries.save_finding(session, probe_id, metric, stat, report.verdict,
                                     report.ratio, (report.ci_low, report.ci_high), change_at,
                                     now)
