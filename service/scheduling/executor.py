"""Executing runs: claim (ahead of the tick, in batches, or at the tick), measure with
`probes`, hand samples and the final record to the write buffer, record metrics."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sustain.probes.client.secrets import SecretUnavailableError
from sustain.probes.load.profiles import parse_profile
from sustain.probes.runner import Measurer, RunStop, TooManyWorkersError
from sustain.probes.workers.conductor import START_LEAD_NS
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workers.process import WorkerDiedError
from sustain.probes.workload.dataset import DatasetError
from sustain.probes.workload.spec import Workload, WorkloadError
from sustain.service.db import probes as probe_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe
from sustain.service.ingest.buffer import RunSink, SampleBuffer
from sustain.service.ingest.writer import RefusalCounts
from sustain.service.metrics import Metrics
from sustain.service.policy.limits import BeyondLimitsError, LoadLimits, check_limits
from sustain.service.policy.reach import Reach
from sustain.service.runs.finals import RunFinal, completed
from sustain.service.scheduling import ahead
from sustain.service.scheduling.ahead import Upcoming
from sustain.service.scheduling.claims import tick_owner
from sustain.service.scheduling.held_ahead import HeldAhead
from sustain.service.scheduling.liveness import PeerLoads
from sustain.service.scheduling.offline import OfflineRuns, OfflineSink
from sustain.service.scheduling.targets import probe_target, slo_of
from sustain.service.ticks.locations import DEFAULT_LOCATION
from sustain.service.ticks.schedule import Schedule, tick_for_firing

logger = logging.getLogger(__name__)

OFFLINE_STORE_AT_CLOSE_S = 5.0
CANCEL_POLL_S = 0.5
"""How often a replica with runs in flight asks the database whether any was cancelled (or
its probe deleted), wherever the cancel was asked: a cancel takes effect within about this."""
CANCELLED = "cancelled on request"
CLAIM_TIMEOUT_S = 3.0
"""A claim that cannot get a database connection by then is taken as an outage: the tick is
run offline by its owner (see offline.py). Only the connection is timed: a claim cut short
after its insert was sent could be committed without this replica knowing."""


def dispatch_lead_s(measurer: Measurer) -> float:
    """How long before a tick's firing its run is handed to the measurer, in seconds. Worker
    processes start a stage START_LEAD_NS after it is dispatched to them (so every worker
    holds its shard before the first send): a run dispatched that much earlier sends its
    first request at the firing plus the time it takes to open the run, never before it.
    Measuring in-process starts at once: no lead."""
    return START_LEAD_NS / 1e9 if isinstance(measurer, WorkerPool) else 0.0


class RunExecutor:
    """Runs probes and owns the tasks of runs in flight."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], measurer: Measurer,
                 metrics: Metrics, replica_id: str, buffer: SampleBuffer,
                 peers: PeerLoads | None = None, limits: LoadLimits | None = None, *,
                 reach: Reach | None = None, refusals: RefusalCounts | None = None,
                 location: str = DEFAULT_LOCATION) -> None:
        self.sessions = sessions
        self.location = location
        """Where this replica measures from: the ticks it claims are this location's."""
        self.measurer = measurer
        """Where runs send and time their requests: worker processes (the default) or this
        process's own loop."""
        self.reach = reach or Reach()
        """Where runs' secret references and datasets may be read from (egress is the
        clients')."""
        self.buffer = buffer
        self.metrics = metrics
        self.replica_id = replica_id
        self._tasks: set[asyncio.Task[object]] = set()
        self._running: set[int] = set()
        """Probes with a run executing on this replica."""
        self._starting: set[int] = set()
        """Runs claimed or started here whose final record is not yet buffered."""
        self._stops: dict[int, tuple[int, RunStop]] = {}
        """Runs executing here: their probe, and what ends them early."""
        self._watcher: asyncio.Task[None] | None = None
        self.claiming = True
        self.peers = peers if peers is not None else PeerLoads()
        """Runs in flight of the other live replicas (kept by the heartbeat)."""
        self.limits = limits
        """Each run's profile is checked against these when it starts, and the run is held to
        their budget while it goes (None: unlimited)."""
        self.offline = OfflineRuns(buffer.capacity, replica_id, refusals, location)
        """Ticks measured during a database outage, until it is back."""
        self._known: dict[int, tuple[Probe, Endpoint]] = {}
        """The enabled probes and their endpoints as last read: what an offline tick runs."""
        self._offline_keys = itertools.count(-1, -1)
        self.held = HeldAhead()
        """The ticks claimed ahead that this replica knows of (its own, and others')."""
        self.lead_s = dispatch_lead_s(measurer)
        """How long before its firing a tick claimed ahead is handed to the measurer."""

    @property
    def in_flight(self) -> int:
        """Runs executing on this replica (its load, for claim spreading)."""
        return len(self._running)

    def start(self) -> None:
        """Start watching for cancels of the runs executing here (and storing the ticks
        measured during an outage, once the database is back)."""
        self._watcher = asyncio.create_task(self._watch_cancels(), name="cancel-watcher")

    @property
    def alive(self) -> bool:
        """Whether its loop runs (started, and neither ended nor cancelled)."""
        return self._watcher is not None and not self._watcher.done()

    def remember(self, pairs: Iterable[tuple[Probe, Endpoint]]) -> None:
        """The enabled probes with their endpoints, as just read (kept for offline ticks)."""
        self._known = {probe.id: (probe, endpoint) for probe, endpoint in pairs}

    async def _watch_cancels(self) -> None:
        """Every CANCEL_POLL_S while runs execute here: stop those cancelled (on any replica)
        or whose probe was deleted; and store finished offline runs. A database that cannot
        answer is asked again next time."""
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            try:
                await self._watch_once()
            except (OSError, DBAPIError, TimeoutError, SATimeoutError) as exc:
                logger.debug("cannot look for cancelled runs (%s)", type(exc).__name__)
            except Exception as exc:  # noqa: BLE001 - the watcher outlives any one pass
                logger.warning("looking for cancelled runs failed unexpectedly (%s); again "
                               "in %ss", type(exc).__name__, CANCEL_POLL_S)

    async def _watch_once(self) -> None:
        if self.offline.pending:
            await self.offline.store(self.sessions)
        watched = sorted(run_id for run_id in self._stops if run_id > 0)
        if not watched:
            return
        async with self.sessions() as session:
            wanted = await run_queries.cancel_wanted(await session.connection(), watched)
        for run_id in wanted:
            self.cancel(run_id)

    def cancel(self, run_id: int) -> bool:
        """Stop a run executing here (its record becomes `cancelled`, with what it measured
        so far); False when it does not execute here."""
        entry = self._stops.get(run_id)
        if entry is not None:
            entry[1].set(CANCELLED)
        return entry is not None

    def cancel_probe(self, probe_id: int) -> None:
        """Stop the runs of a probe executing here (it was disabled or deleted)."""
        for run_id, (probe, _) in list(self._stops.items()):
            if probe == probe_id:
                self.cancel(run_id)

    def stop_claiming(self) -> None:
        """Shutdown has begun: ticks from now on are left to other replicas (those already
        claimed ahead still start when they fire)."""
        self.claiming = False

    @property
    def claimed_ahead(self) -> int:
        """Ticks claimed ahead here that have not fired yet."""
        return len(self.held.waiting)

    async def claim_ahead(self, batch: Sequence[Upcoming]) -> bool:
        """Claim the batch's ticks in one transaction, to be started when they fire without
        a database round trip. Ticks left out (their probe busy, or this replica unable to
        take new runs) are claimed when they fire; ticks another replica took are left to
        it. False when the database could not take the batch (its ticks are then claimed
        when they fire, where an outage is handled)."""
        if not self.claiming or not self.buffer.accepting:
            return True
        wanted = self.held.wanted(batch, self._running)
        if not wanted:
            return True
        answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.begin(wanted, answered)
        try:
            async with self.sessions.begin() as session:
                async with asyncio.timeout(CLAIM_TIMEOUT_S):  # nothing is written yet
                    await session.connection()
                outcomes = await ahead.claim_batch(
                    session, wanted, self.replica_id, self.location,
                    self.buffer.unwritten_finals)
                loaded = await ahead.probes_with_endpoints(
                    session, [o.upcoming.probe_id for o in outcomes if o.run_id is not None])
            self.held.batches += 1
            self._starting.update(self.held.keep(
                outcomes, loaded, self._start_ahead, self.lead_s, datetime.now(UTC)))
            self._known.update({probe_id: found for probe_id, found in loaded.items()
                                if probe_id not in self.held.dropped})
        except IntegrityError:
            logger.info("a probe was deleted while its tick was claimed ahead; the batch's "
                        "ticks are claimed when they fire")
        except (OSError, DBAPIError, TimeoutError, SATimeoutError) as exc:
            logger.info("cannot claim %d ticks ahead (%s); they are claimed when they fire",
                        len(wanted), type(exc).__name__)
            return False
        finally:
            self.held.end(wanted, answered)
        return True

    def _start_ahead(self, key: tuple[int, datetime]) -> None:
        """A tick claimed ahead fires: start its run (its job's firing then finds it
        started)."""
        claimed = self.held.take(key)
        if claimed is None:
            return
        probe = claimed.probe
        if probe.id in self._running:  # a run measured offline is still going here
            self._overlapped(probe.name, key[1])
            self.held.owed.skip.append(claimed.run_id)
            return
        self._track(asyncio.create_task(
            self._execute(claimed.run_id, key[1], probe, claimed.endpoint),
            name=f"run-{claimed.run_id}"))

    def _overlapped(self, probe_name: str, tick: datetime) -> None:
        """A tick fired while its probe's previous run was still going: it is skipped."""
        logger.warning("tick %s of probe %s skipped: its previous run is still going",
                       tick, probe_name)
        self.metrics.ticks_skipped.labels(probe_name, "overlap").inc()

    def release_probe(self, probe_id: int) -> None:
        """The probe no longer runs here: its ticks claimed ahead are given up (deleted by
        the next `settle`)."""
        self.held.release_probe(probe_id)

    async def settle(self, now: datetime) -> None:
        """Delete the claims given up, record those not started in time `missed` and those
        that fired while their probe's previous run was going `skipped`, and forget what
        other replicas claimed long ago: at most three statements. A database that cannot
        answer is asked again next time."""
        for key, claimed in self.held.expire_due(now):
            logger.warning("run %s (tick %s of probe %s) was claimed ahead but not started "
                           "in time: recorded missed", claimed.run_id, key[1], key[0])
        if not self.held.owed:
            return
        owed = self.held.owed.copy()
        try:
            async with self.sessions.begin() as session:
                await ahead.release(session, owed.release, self.replica_id)
                await ahead.expire(session, owed.expire, self.replica_id)
                await ahead.skip(session, owed.skip, self.replica_id)
        except (OSError, DBAPIError, TimeoutError, SATimeoutError) as exc:
            logger.debug("cannot settle claims made ahead (%s)", type(exc).__name__)
            return
        self.held.owed.remove(owed)
        self._starting.difference_update(owed.run_ids())

    async def run_tick(self, probe_id: int, probe_name: str, schedule: Schedule,
                       jitter_s: float, grace_s: float) -> None:
        """APScheduler job: start the run of the tick this firing is for, in a task of its
        own, so the job ends at once and the next firing of a still-running probe reaches
        the claim (and is recorded as skipped) instead of being dropped by APScheduler. A
        tick claimed ahead has started already (or starts now, if its timer is late); one
        claimed ahead elsewhere is left alone; any other is claimed now."""
        tick = tick_for_firing(schedule, probe_id, jitter_s, grace_s, datetime.now(UTC))
        if tick is None:
            return
        key = (probe_id, tick)
        if key in self.held.started:
            return
        self.held.fired[key] = datetime.now(UTC) + timedelta(
            seconds=grace_s + ahead.EXPIRY_MARGIN_S)
        batch = self.held.claiming.get(key)
        if batch is not None:  # its batch is being claimed: wait for the answer
            await batch
        claimed = self.held.waiting.get(key)
        if claimed is not None:  # its timer has not run yet (a busy loop): start it here
            if claimed.timer is not None:
                claimed.timer.cancel()
            self._start_ahead(key)
            return
        if self.held.elsewhere.pop(key, None) is not None:
            logger.debug("tick %s of probe %s taken by another replica", tick, probe_name)
            return
        started = await self.claim(probe_id, probe_name, tick)
        if started is None:
            return
        run_id, _, probe, _ = started
        sink = None if run_id > 0 else self.offline.open(probe.id, tick, datetime.now(UTC))
        self._track(asyncio.create_task(self._execute(*started, sink=sink),
                                        name=f"run-{run_id}"))

    async def claim(self, probe_id: int, probe_name: str, tick: datetime
                    ) -> tuple[int, datetime, Probe, Endpoint] | None:
        """Claim a tick; the run to execute, or None (taken elsewhere, skipped, or not ours
        to take). When the database cannot answer, the tick's owner among the replicas last
        seen alive runs it offline (a negative run id: not stored yet)."""
        if not self.claiming:
            return None
        if not self.buffer.accepting:
            logger.warning("write buffer nearly full (%d samples); tick of probe %s left to "
                           "other replicas", self.buffer.samples, probe_name)
            self.metrics.ticks_skipped.labels(probe_name, "buffer_full").inc()
            return None
        if probe_id in self._running:  # a run measured offline is still going here
            self._overlapped(probe_name, tick)
            return None
        try:
            async with self.sessions.begin() as session:
                async with asyncio.timeout(CLAIM_TIMEOUT_S):  # nothing is written yet
                    await session.connection()
                claim = await run_queries.claim_scheduled(
                    session, probe_id, tick, self.replica_id, self.location,
                    sorted(self.buffer.unwritten_finals))
                if claim is None or claim.skipped:
                    probe = endpoint = None
                else:
                    probe, endpoint = await probe_queries.get_with_endpoint(session, probe_id)
                    self._known[probe_id] = (probe, endpoint)
                    self._starting.add(claim.run_id)
        except IntegrityError:
            logger.info("probe %s was deleted before its tick %s", probe_id, tick)
            return None
        except (OSError, DBAPIError, TimeoutError, SATimeoutError) as exc:
            return self._claim_offline(probe_id, probe_name, tick, type(exc).__name__)
        if claim is None:
            logger.debug("tick %s of probe %s taken by another replica", tick, probe_name)
            return None
        if claim.skipped:
            self._overlapped(probe_name, tick)
            return None
        assert probe is not None
        assert endpoint is not None
        return claim.run_id, tick, probe, endpoint

    def _claim_offline(self, probe_id: int, probe_name: str, tick: datetime, why: str
                       ) -> tuple[int, datetime, Probe, Endpoint] | None:
        """The database cannot answer (`why`): run the tick anyway when this replica owns it
        among those last seen alive, from the probe as last read, unless its previous run
        is still going here."""
        known = self._known.get(probe_id)
        if known is None:
            logger.warning("cannot claim tick %s of probe %s (%s), and it was never read "
                           "here: not run", tick, probe_name, why)
            return None
        if not tick_owner(probe_id, tick, self.replica_id, self.peers.known):
            logger.info("cannot claim tick %s of probe %s (%s); another replica owns it",
                        tick, probe_name, why)
            return None
        if probe_id in self._running:
            self._overlapped(probe_name, tick)
            return None
        logger.warning("cannot claim tick %s of probe %s (%s): running it offline, to be "
                       "stored when the database is back", tick, probe_name, why)
        probe, endpoint = known
        return next(self._offline_keys), tick, probe, endpoint

    def run_ids(self) -> set[int]:
        """Runs this replica is responsible for: started and not yet handed to the write
        buffer, or handed over with their final record not yet durable (so the liveness
        check never abandons a run that has finished but is still being written)."""
        return set(self._starting) | self.buffer.unwritten_finals

    async def drain(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the ticks claimed ahead to fire (within the lead, a
        few seconds) and then for the runs in flight to finish; True if they all did."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        last = self.held.last_firing()
        if last is not None:
            wait_s = (last - datetime.now(UTC)).total_seconds() + ahead.EXPIRY_MARGIN_S
            await asyncio.sleep(max(0.0, min(wait_s, timeout_s)))
        tasks = list(self._tasks)
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
        return not pending

    def submit(self, run_id: int) -> None:
        """Execute a run in the background (run-now requests)."""
        self._starting.add(run_id)
        self._track(asyncio.create_task(self.execute(run_id), name=f"run-{run_id}"))

    def _track(self, task: asyncio.Task[object]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background run task %s failed", task.get_name(),
                         exc_info=task.exception())

    async def execute(self, run_id: int) -> None:
        """Start a pending run (run-now) and run it to completion."""
        try:
            async with self.sessions.begin() as session:
                run = await run_queries.get(session, run_id)
                probe, endpoint = await probe_queries.get_with_endpoint(session, run.probe_id)
                started = await run_queries.mark_running(session, run_id, self.replica_id)
        except BaseException:
            self._starting.discard(run_id)
            raise
        if not started:
            self._starting.discard(run_id)
            logger.info("run %s was cancelled before it started", run_id)
            return
        await self._execute(run_id, run.scheduled_for, probe, endpoint)

    async def _execute(self, run_id: int, scheduled_for: datetime, probe: Probe,
                       endpoint: Endpoint, sink: RunSink | OfflineSink | None = None) -> None:
        """Run to completion; whatever happens, the run's final record goes to the buffer
        after its samples (or, for a tick measured during an outage, to `sink`), and the
        writer makes both durable."""
        if sink is None:
            sink = self.buffer.open(run_id, probe.id)
        base = RunFinal(run_id=run_id, probe_id=probe.id, scheduled_for=scheduled_for,
                        status="failed")
        stop = RunStop()
        self._running.add(probe.id)
        self._stops[run_id] = (probe.id, stop)
        try:
            profile = parse_profile(probe.profile)
            if self.limits is not None:
                check_limits(profile, self.limits)
            result = await self.measurer.measure(
                probe_target(endpoint, probe.rag_embed_endpoint, probe.rag_rerank_endpoint),
                Workload.model_validate(probe.workload),
                profile,
                slo_of(probe),
                on_sample=sink.put,
                stop=stop,
                budget=None if self.limits is None else self.limits.budget(),
                secrets=self.reach.secrets,
                datasets=self.reach.datasets,
            )
            final = await asyncio.to_thread(completed, base, result)
            if result.stopped == CANCELLED:
                final = replace(final, status="cancelled", error=CANCELLED)
        except asyncio.CancelledError:
            self._end(sink, probe, replace(base, status="interrupted",
                                           error="service stopped during the run"))
            raise
        except (SecretUnavailableError, BeyondLimitsError, DatasetError, TooManyWorkersError,
                WorkerDiedError, WorkloadError) as exc:
            self._end(sink, probe, replace(base, error=str(exc)))
        except Exception as exc:
            logger.exception("run %s of probe %s crashed", run_id, probe.name)
            self._end(sink, probe, replace(base, error=f"internal error: {type(exc).__name__}"))
        else:
            self.metrics.observe_samples(endpoint.name, probe.name, endpoint.model,
                                         result.samples)
            self._end(sink, probe, final)
            logger.info("run %s of probe %s %s: %d requests, availability %s", run_id,
                        probe.name, final.status, result.summary.attempts,
                        result.summary.availability)
        finally:
            self._running.discard(probe.id)
            self._stops.pop(run_id, None)

    def _end(self, sink: RunSink | OfflineSink, probe: Probe, final: RunFinal) -> None:
        sink.finish(final)
        self._starting.discard(final.run_id)
        self.metrics.observe_run(probe.name, final.status)
        if final.error is not None:
            logger.warning("run %s of probe %s %s: %s", final.run_id, probe.name, final.status,
                           final.error)

    async def close(self) -> None:
        """Cancel runs in flight; each marks itself abandoned. Ticks claimed ahead that did
        not start are settled, and ticks measured during an outage get one last try at being
        stored (before the writer's final flush)."""
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # ticks claimed ahead that will not run here now: those still to fire are given
        # back (deleted), those whose firing passed unstarted are recorded missed
        now = datetime.now(UTC)
        self.held.give_back_all(now)
        try:
            async with asyncio.timeout(OFFLINE_STORE_AT_CLOSE_S):
                await self.settle(now)
        except TimeoutError:
            pass
        await self.offline.store_last(self.sessions, OFFLINE_STORE_AT_CLOSE_S)
