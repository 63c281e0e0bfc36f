"""One APScheduler job per enabled probe; REST changes update the job immediately."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.config import Settings
from service.db import probes as probe_queries
from service.db.models import Probe
from service.scheduling.executor import RunExecutor
from service.scheduling.maintenance import maintain
from service.scheduling.ticks import next_tick
from service.scheduling.trigger import AlignedIntervalTrigger

logger = logging.getLogger(__name__)

LOAD_JOB = "load-probes"
LOAD_RETRY_S = 5
MAINTENANCE_JOB = "storage-maintenance"
MAINTENANCE_INTERVAL_S = 3600


def catch_up_now(now: datetime, interval_s: int) -> bool:
    """Run the current tick at once only if at least half an interval remains before the
    next one, so the catch-up run does not collide with (and skip) the next tick."""
    remaining = next_tick(None, now, interval_s) - now
    return remaining.total_seconds() >= interval_s / 2


def job_id(probe_id: int) -> str:
    return f"probe:{probe_id}"


class ProbeScheduler:
    def __init__(self, executor: RunExecutor, sessions: async_sessionmaker[AsyncSession],
                 engine: AsyncEngine, settings: Settings) -> None:
        self.executor = executor
        self.sessions = sessions
        self.engine = engine
        self.settings = settings
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    @property
    def running(self) -> bool:
        return bool(self._scheduler.running)

    async def start(self) -> None:
        """Start, and load the enabled probes; if the database cannot answer yet (down, or not
        migrated), keep retrying in the background instead of failing the service."""
        self._scheduler.start()
        self._scheduler.add_job(
            self.maintain, IntervalTrigger(seconds=MAINTENANCE_INTERVAL_S),
            id=MAINTENANCE_JOB, next_run_time=datetime.now(UTC), max_instances=1,
            coalesce=True, misfire_grace_time=None)
        if not await self.load_probes():
            self._scheduler.add_job(self._retry_load, IntervalTrigger(seconds=LOAD_RETRY_S),
                                    id=LOAD_JOB, max_instances=1, coalesce=True)

    async def maintain(self) -> None:
        """Storage maintenance; a failure (database down) waits for the next hour."""
        try:
            await maintain(self.engine,
                           sample_retention_days=self.settings.sample_retention_days,
                           run_retention_days=self.settings.run_retention_days)
        except (OSError, DBAPIError) as exc:
            logger.warning("storage maintenance failed (%s); next try in %ss",
                           type(exc).__name__, MAINTENANCE_INTERVAL_S)

    async def load_probes(self) -> bool:
        try:
            async with self.sessions() as session:
                probes = await probe_queries.list_all(session, enabled_only=True)
        except (OSError, DBAPIError) as exc:
            logger.warning("cannot load probes yet (%s); retrying every %ss",
                           type(exc).__name__, LOAD_RETRY_S)
            return False
        for probe in probes:
            self.sync(probe)
        logger.info("scheduler running %d probe jobs", len(probes))
        return True

    async def _retry_load(self) -> None:
        if await self.load_probes():
            self._scheduler.remove_job(LOAD_JOB)

    def sync(self, probe: Probe) -> None:
        """Make the probe's job match its row: ticks on interval multiples since the epoch.

        A new job also runs the current tick once, right away, unless the next tick is near
        (see catch_up_now): the claim in Postgres makes that a no-op when the tick already has
        a run (a restart, another replica), and otherwise a new probe shows data at once.
        """
        if not probe.enabled:
            self.remove(probe.id)
            return
        first_job = self._scheduler.get_job(job_id(probe.id)) is None
        args = (probe.id, probe.interval_seconds, probe.name)
        self._scheduler.add_job(
            self.executor.run_tick,
            AlignedIntervalTrigger(probe.interval_seconds, probe.jitter_seconds),
            args=args, id=job_id(probe.id), name=probe.name, replace_existing=True,
            max_instances=1, coalesce=True, misfire_grace_time=max(1, probe.interval_seconds // 2),
        )
        now = datetime.now(UTC)
        if first_job and catch_up_now(now, probe.interval_seconds):
            self._scheduler.add_job(self.executor.run_tick, "date", args=args, run_date=now,
                                    id=f"{job_id(probe.id)}:now", replace_existing=True,
                                    misfire_grace_time=None)

    async def refresh(self, probe_id: int) -> None:
        """Re-read the probe after a write and make its job match. Serialised per probe, and
        always from the newest committed row, so concurrent writes cannot leave a stale job."""
        async with self._locks[probe_id]:
            async with self.sessions() as session:
                probe = await session.get(Probe, probe_id)
            if probe is None:
                self.remove(probe_id)
            else:
                self.sync(probe)

    def remove(self, probe_id: int) -> None:
        for ident in (job_id(probe_id), f"{job_id(probe_id)}:now"):
            if self._scheduler.get_job(ident) is not None:
                self._scheduler.remove_job(ident)

    def next_run_time(self, probe_id: int) -> datetime | None:
        job = self._scheduler.get_job(job_id(probe_id))
        return None if job is None else job.next_run_time

    async def shutdown(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
