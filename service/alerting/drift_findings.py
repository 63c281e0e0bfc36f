"""Drift findings: every drift_evaluation_s one replica (an advisory lock decides which)
compares each enabled probe's recent window with the baseline window before it, for each
watched metric statistic (drift_report, as the REST route does: its CPU work runs in a worker
thread), and stores the verdict. sustain_drift_ratio and the SustainDrift alert read the
stored findings, so a scrape or an evaluation pass never recomputes them."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sustain.service.db import drift as drift_queries
from sustain.service.db.models import Probe

DRIFT_LOCK_KEY = 0x5375_7374_0003


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
                result = await drift_queries.drift_report(
                    session, probe_id, metric, stat, end=now, window=window,
                    baseline=baseline)
                await drift_queries.save_finding(session, probe_id, metric, stat, result, now)
    return True

