"""One APScheduler job per enabled probe, kept in step with the database: at once after a
change on this replica, within moments after a change on another (LISTEN/NOTIFY), and by a
periodic reconcile as a safety net, which also records ticks no replica started as missed.
Beside the jobs, a plan of every probe's next firing, from which a loop claims the ticks
about to fire in batches (scheduling/ahead.py), so that a firing starts its run without a
database round trip."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from sustain.service.config import Settings
from sustain.service.db import replicas as replica_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe
from sustain.service.db.sample_packing import pack_finished
from sustain.service.db.summary_records import convert_old
from sustain.service.scheduling import ahead, missed
from sustain.service.scheduling.ahead import (
    MIN_AHEAD_S,
    PAUSE_AFTER_FAILURE_S,
    STEP_S,
    TickPlan,
)
from sustain.service.scheduling.executor import RunExecutor
from sustain.service.scheduling.liveness import STALE_BEATS
from sustain.service.scheduling.maintenance import maintain
from sustain.service.scheduling.trigger import TickTrigger
from sustain.service.ticks.schedule import Cron, Every, Schedule, ticks_between

logger = logging.getLogger(__name__)

RECONCILE_JOB = "reconcile"
MAINTENANCE_JOB = "storage-maintenance"
MAINTENANCE_INTERVAL_S = 3600
MISSED_MARGIN_S = 5.0
"""A tick is reported missed only this long after it could last have started."""
MISSED_LIMIT = 10_000
"""At most this many missed ticks are recorded per probe and pass (the newest)."""
YIELD_EVERY = 100
"""A reconcile lets the event loop run other work (ticks firing) after this many probes."""
PROBE_VERSIONS = text("""
    SELECT p.id, md5((to_jsonb(p) - 'ticks_checked_until')::text || to_jsonb(e)::text
                     || coalesce(to_jsonb(re)::text, '') || coalesce(to_jsonb(rr)::text, '')),
           p.ticks_checked_until
    FROM probes p JOIN endpoints e ON e.id = p.endpoint_id
    LEFT JOIN endpoints re ON re.id = p.rag_embed_endpoint_id
    LEFT JOIN endpoints rr ON rr.id = p.rag_rerank_endpoint_id
    WHERE p.enabled
""")
"""Every enabled probe's id, a digest of its row (less the watermark the reconcile itself
moves) and endpoints, and its missed-tick watermark: what tells a reconcile which probes
changed, whoever changed them and however."""


def schedule_of(probe: Probe) -> Schedule:
    return Cron(probe.cron) if probe.cron else Every(probe.interval_seconds)


def catch_up_now(schedule: Schedule, now: datetime) -> bool:
    """Run the current tick at once only if at least half a period remains before the next
    one, so the catch-up run does not collide with (and skip) the next tick."""
    remaining = (schedule.next_after(now) - now).total_seconds()
    return remaining >= schedule.period_s(now) / 2


def job_id(probe_id: int) -> str:
    return f"probe:{probe_id}"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a probe's job depends on: a change to any of it replaces the job."""

    name: str
    schedule: Schedule
    jitter_s: float
    grace_s: float


class ProbeScheduler:
    def __init__(self, executor: RunExecutor, sessions: async_sessionmaker[AsyncSession],
                 engine: AsyncEngine, settings: Settings) -> None:
        self.executor = executor
        self.sessions = sessions
        self.engine = engine
        self.settings = settings
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._specs: dict[int, JobSpec] = {}
        self._refreshed_at: dict[int, float] = {}
        """When each probe was last re-read on its own (a reconcile that read all probes
        before that leaves it alone)."""
        self.loaded = False
        """Whether the probes have been read from the database at least once."""
        self.plan = TickPlan()
        """The next firing of each probe scheduled here, for claiming ticks ahead."""
        self._planner: asyncio.Task[None] | None = None
        self._pausing = False
        self._read: dict[int, tuple[str, Probe, Endpoint]] = {}
        """The enabled probes as the last reconcile read them, with the version of their
        row and endpoints."""

    @property
    def running(self) -> bool:
        return bool(self._scheduler.running)

    async def start(self) -> None:
        """Start and load the enabled probes; if the database cannot answer yet (down, or not
        migrated), the reconcile job keeps trying instead of failing the service."""
        self._scheduler.start()
        self._scheduler.add_job(
            self.maintain, IntervalTrigger(seconds=MAINTENANCE_INTERVAL_S),
            id=MAINTENANCE_JOB, next_run_time=datetime.now(UTC), max_instances=1,
            coalesce=True, misfire_grace_time=None)
        self._scheduler.add_job(
            self.reconcile, IntervalTrigger(seconds=self.settings.reconcile_s),
            id=RECONCILE_JOB, max_instances=1, coalesce=True, misfire_grace_time=None)
        await self.reconcile()
        self._planner = asyncio.create_task(self._claim_ahead(), name="claim-ahead")

    def pause(self) -> None:
        """Shutdown has begun: claim no more ticks (those already claimed ahead still start
        when they fire, within the lead), and no more reconciles or maintenance."""
        self._pausing = True  # the planner ends after its batch in flight, if any
        self.executor.stop_claiming()
        for job in (RECONCILE_JOB, MAINTENANCE_JOB):
            if self._scheduler.get_job(job) is not None:
                self._scheduler.pause_job(job)

    async def _claim_ahead(self) -> None:
        """Every STEP_S: claim the ticks whose claiming moment has come, in one batch; then
        settle what was claimed ahead earlier. A tick that fires within MIN_AHEAD_S (this
        loop ran late) is left to be claimed when it fires, by whichever replica fires it
        first; so is every tick for PAUSE_AFTER_FAILURE_S after a batch the database could
        not take."""
        paused_until = 0.0
        min_ahead = timedelta(seconds=MIN_AHEAD_S)
        while not self._pausing:
            started = time.monotonic()
            try:
                now = datetime.now(UTC)
                batch = self.plan.due(now + timedelta(seconds=STEP_S),
                                      self.executor.replica_id, self.executor.peers.others,
                                      self.executor.in_flight)
                if batch and started >= paused_until and not await self.executor.claim_ahead(
                        [u for u in batch if u.fire_at > now + min_ahead]):
                    paused_until = time.monotonic() + PAUSE_AFTER_FAILURE_S
                await self.executor.settle(now)
            except Exception:
                logger.exception("claiming ticks ahead failed unexpectedly; they are claimed "
                                 "when they fire meanwhile")
            await asyncio.sleep(max(0.0, STEP_S - (time.monotonic() - started)))

    async def maintain(self) -> None:
        """Storage maintenance; a failure (database down, no file descriptor left, anything
        unexpected) waits for the next hour."""
        try:
            await maintain(self.engine,
                           sample_retention_days=self.settings.sample_retention_days,
                           run_retention_days=self.settings.run_retention_days,
                           audit_retention_days=self.settings.audit_retention_days)
            await pack_finished(self.engine, datetime.now(UTC) - timedelta(
                seconds=self.settings.sample_pack_after_s))
            await convert_old(self.engine)
        except Exception as exc:  # noqa: BLE001 - the job outlives any one pass
            logger.warning("storage maintenance failed (%s); next try in %ss",
                           type(exc).__name__, MAINTENANCE_INTERVAL_S)

    async def reconcile(self) -> bool:
        """Make the jobs match every enabled probe in the database, and record missed ticks.
        False (and a warning) if the database cannot answer, or anything else fails: the
        job runs again in reconcile_s."""
        started = time.monotonic()
        try:
            pairs = await self._read_enabled()
        except Exception as exc:  # noqa: BLE001 - the job outlives any one pass
            logger.warning("cannot read probes (%s); retrying every %ss",
                           type(exc).__name__, self.settings.reconcile_s)
            return False
        probes = [probe for probe, _ in pairs]
        self.executor.remember(pairs)
        wanted = {probe.id for probe in probes if self.runs_here(probe)}
        fresher = {p for p, at in self._refreshed_at.items() if at >= started}
        for probe_id in set(self._specs) - wanted - fresher:
            self.remove(probe_id)
        for i, probe in enumerate(probes):
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)  # ticks due meanwhile fire on time
            if self._refreshed_at.get(probe.id, -1.0) < started:  # else a refresh read a
                self.sync(probe)                                   # newer row meanwhile
        if not self.loaded:
            logger.info("scheduler running %d probe jobs in location %s", len(wanted),
                        self.settings.location)
        self.loaded = True
        try:
            await self.record_missed(probes)
        except Exception as exc:  # noqa: BLE001 - recorded at the next reconcile
            logger.warning("cannot record missed ticks (%s)", type(exc).__name__)
        return True

    async def _read_enabled(self) -> list[tuple[Probe, Endpoint]]:
        """Every enabled probe with its endpoint, as committed now. Only the probes whose
        row or endpoints changed since the last pass are read whole (one statement); the
        others come from that pass, with their missed-tick watermark brought up to date, so
        a pass over thousands of unchanged probes decodes no JSON on the event loop."""
        async with self.sessions() as session:
            rows = (await session.execute(PROBE_VERSIONS)).all()
            versions = {int(r[0]): str(r[1]) for r in rows}
            stale = [i for i, v in versions.items()
                     if i not in self._read or self._read[i][0] != v]
            fresh = await ahead.probes_with_endpoints(session, stale)
        self._read = {i: (versions[i], *pair) for i, pair in fresh.items() if i in versions} | {
            i: kept for i, kept in self._read.items() if i in versions and i not in fresh}
        for row in rows:
            kept = self._read.get(int(row[0]))
            if kept is not None:
                kept[1].ticks_checked_until = row[2]
        return [(probe, endpoint) for _, probe, endpoint in sorted(self._read.values(),
                                                                  key=lambda k: k[1].id)]

    async def record_missed(self, probes: Sequence[Probe]) -> int:
        """Record, as `missed` runs, the ticks of enabled probes that no replica started in a
        location of theirs and that can no longer start (past jitter and misfire grace),
        in every location, this replica's or not: a location where nothing is alive has no
        one else to say so, and its ticks say why. Each probe keeps a watermark of how far
        this has been checked (in all its locations at once, in one transaction), so a gap is
        found even when later ticks ran; ticks before the schedule began, and ticks that have
        any run in their location, are left alone."""
        now = datetime.now(UTC)
        spans = []
        for i, probe in enumerate(probes):
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            spec = self.spec_of(probe)
            after = max(probe.schedule_since, probe.ticks_checked_until or probe.schedule_since)
            until = now - timedelta(seconds=spec.jitter_s + spec.grace_s + MISSED_MARGIN_S)
            if until > after:
                spans.append((probe, spec.schedule, after, until))
        if not spans:
            return 0
        ticks = await asyncio.to_thread(
            lambda: [ticks_between(schedule, after, until, MISSED_LIMIT)
                     for _, schedule, after, until in spans])
        async with self.sessions.begin() as session:
            live = await replica_queries.live_locations(
                await session.connection(), STALE_BEATS * self.settings.heartbeat_s)
            live.add(self.settings.location)
            candidates = [
                missed.Candidate(probe.id, location, tick,
                                 run_queries.missed_reason(location, location in live))
                for (probe, *_), probe_ticks in zip(spans, ticks, strict=True)
                for location in probe.locations for tick in probe_ticks]
            recorded = await missed.record(session, candidates)
            await missed.advance(session, {probe.id: until for probe, _, _, until in spans})
        names = {probe.id: probe.name for probe, *_ in spans}
        for (probe_id, location), count in sorted(recorded.items()):
            logger.warning("probe %s: %d ticks were missed in location %s (%s)",
                           names[probe_id], count, location,
                           run_queries.missed_reason(location, location in live))
        return sum(recorded.values())

    def spec_of(self, probe: Probe) -> JobSpec:
        """What the probe's job is (or would be, on a replica of its locations)."""
        schedule = schedule_of(probe)
        return JobSpec(probe.name, schedule, probe.jitter_seconds, self._grace_s(schedule))

    def runs_here(self, probe: Probe) -> bool:
        """Whether this replica runs the probe's ticks: it is enabled and lists this
        replica's location."""
        return probe.enabled and self.settings.location in probe.locations

    def _grace_s(self, schedule: Schedule) -> float:
        return min(self.settings.misfire_grace_s,
                   schedule.period_s(datetime.now(UTC)) / 2)

    def sync(self, probe: Probe) -> None:
        """Make the probe's job match its row (a no-op when nothing that matters changed).

        A new job also runs the current tick once, right away, unless the next tick is near
        (see catch_up_now): the claim in Postgres makes that a no-op when the tick already has
        a run (a restart, another replica), and otherwise a new probe shows data at once.
        """
        if not self.runs_here(probe):
            self.remove(probe.id)
            return
        spec = self.spec_of(probe)
        schedule = spec.schedule
        previous = self._specs.get(probe.id)
        if previous == spec:
            return
        self._specs[probe.id] = spec
        args = (probe.id, probe.name, schedule, spec.jitter_s, spec.grace_s)
        trigger = TickTrigger(schedule, probe.id, probe.jitter_seconds)
        self._scheduler.add_job(
            self.executor.run_tick, trigger,
            args=args, id=job_id(probe.id), name=probe.name, replace_existing=True,
            max_instances=1, coalesce=True, misfire_grace_time=max(1, int(spec.grace_s)),
        )
        now = datetime.now(UTC)
        self.plan.track(probe.id, trigger, spec.grace_s, schedule.period_s(now), now)
        if previous is None and catch_up_now(schedule, now):
            catch_up = (*args[:4], schedule.period_s(now))  # any lateness within the period
            self._scheduler.add_job(self.executor.run_tick, "date", args=catch_up, run_date=now,
                                    id=f"{job_id(probe.id)}:now", replace_existing=True,
                                    misfire_grace_time=None)

    async def refresh(self, probe_id: int) -> None:
        """Re-read the probe after a write and make its job match. Serialised per probe, and
        always from the newest committed row, so concurrent writes cannot leave a stale job."""
        async with self._locks[probe_id]:
            self._refreshed_at[probe_id] = time.monotonic()
            async with self.sessions() as session:
                probe = await session.get(Probe, probe_id)
            if probe is None:
                self.remove(probe_id)
            else:
                self.sync(probe)

    def remove(self, probe_id: int) -> None:
        if self._specs.pop(probe_id, None) is not None:  # it was scheduled (and planned) here
            self.plan.forget(probe_id)
            self.executor.release_probe(probe_id)
        for ident in (job_id(probe_id), f"{job_id(probe_id)}:now"):
            if self._scheduler.get_job(ident) is not None:
                self._scheduler.remove_job(ident)

    def specs(self) -> dict[int, JobSpec]:
        """The job of each probe scheduled on this replica, by probe id."""
        return dict(sorted(self._specs.items()))

    def job_schedule(self, probe_id: int) -> Schedule | None:
        """The schedule the probe's installed job fires on (None: no job on this replica)."""
        job = self._scheduler.get_job(job_id(probe_id))
        trigger = None if job is None else job.trigger
        return trigger.schedule if isinstance(trigger, TickTrigger) else None

    def next_run_time(self, probe_id: int) -> datetime | None:
        job = self._scheduler.get_job(job_id(probe_id))
        return None if job is None else job.next_run_time

    async def shutdown(self) -> None:
        if self._planner is not None:
            self._planner.cancel()
            await asyncio.gather(self._planner, return_exceptions=True)
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
