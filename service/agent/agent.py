"""One agent: it builds and stops everything an agent runs. It heartbeats to the service,
keeps an APScheduler job per probe of its location, claims each tick through the API (or,
when the service cannot answer, runs the ticks it owns among the location's members last
seen alive, as a replica does during a database outage), measures in its own worker
processes, spools each finished run to disk and uploads it.

The wall-clock offset to the service is measured at each heartbeat (the midpoint of the
round trip against the service's answer time) and reported; latencies come only from the
agent's monotonic clock."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client import CollectorRegistry

from sustain.probes.client.secrets import SecretUnavailableError
from sustain.probes.runner import Measurer, RunStop, TooManyWorkersError
from sustain.probes.workers.process import WorkerDiedError
from sustain.probes.workload.dataset import DatasetError
from sustain.probes.workload.spec import WorkloadError
from sustain.service.agent.client import Refused, ServiceClient, Unreachable, new_upload_id
from sustain.service.agent.spool import Spool, SpooledRun, SpoolFullError
from sustain.service.otlp.setup import OtlpExport, start_export
from sustain.service.policy.limits import BeyondLimitsError, LoadLimits, check_limits
from sustain.service.policy.reach import Reach
from sustain.service.probe_metrics import ProbeMetrics
from sustain.service.runs.finals import RunFinal, completed
from sustain.service.runs.upload import encode_final, encode_samples
from sustain.service.scheduling.claims import tick_owner
from sustain.service.scheduling.targets import probe_target
from sustain.service.scheduling.trigger import TickTrigger
from sustain.service.schemas.agent import Assignment
from sustain.service.ticks.schedule import Cron, Every, Schedule, tick_for_firing

logger = logging.getLogger(__name__)

CANCELLED = "cancelled on request"
STOPPED = "the agent stopped during the run"
UPLOAD_RETRY_S = 2.0
"""How often the uploader tries again while the service cannot answer."""
MISFIRE_GRACE_S = 30.0


def default_name() -> str:
    """This agent process: host name and pid (its claims are the key's name and this)."""
    host = "".join(c if c.isalnum() or c in "-._" else "-" for c in socket.gethostname())
    return f"{host[:80] or 'agent'}-{os.getpid()}"


def schedule_of(assignment: Assignment) -> Schedule:
    probe = assignment.probe
    return Cron(probe.cron) if probe.cron else Every(probe.interval_s)


@dataclass
class AgentState:
    """What the agent knows of the service, for /readyz and metrics."""

    reachable: bool = False
    last_beat: float | None = None
    """time.monotonic() of the last heartbeat the service answered."""
    clock_offset_ms: float | None = None
    agent_id: str | None = None
    peers: frozenset[str] = frozenset()
    version: str | None = None
    uploads: dict[str, int] = field(default_factory=dict)
    """Runs uploaded, by the service's answer (stored, duplicate, partition, dropped)."""
    spool_refused: int = 0
    """Ticks not run because the spool was nearly full."""


class Agent:
    def __init__(self, client: ServiceClient, measurer: Measurer, spool: Spool, *,
                 location: str, heartbeat_s: float = 5.0, reach: Reach | None = None,
                 limits: LoadLimits | None = None, metrics: ProbeMetrics | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.client = client
        self.measurer = measurer
        self.spool = spool
        self.location = location
        self.heartbeat_s = heartbeat_s
        self.reach = reach or Reach()
        self.limits = limits
        self.metrics = metrics or ProbeMetrics(CollectorRegistry(), location)
        self.otlp: OtlpExport | None = None
        """OpenTelemetry export of the runs measured here (service/otlp), from `start` where
        an OTLP endpoint is configured."""
        self.clock = clock
        self.state = AgentState()
        self.assignments: dict[int, Assignment] = {}
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[int, tuple[int | None, RunStop]] = {}
        """Probes measuring here: their run id (None: offline) and what stops the run."""
        self._ended: set[int] = set()
        """Claimed runs that ended here and are not yet in the spool."""
        self._wake = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self.stopping = False

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the scheduler and the heartbeat and upload loops; the first heartbeat and
        assignments are tried at once (an unreachable service is retried by the loops)."""
        self.otlp = start_export(self.location)
        self._scheduler.start()
        await self.beat()
        self._loops = [asyncio.create_task(self._beat_loop(), name="agent-heartbeat"),
                       asyncio.create_task(self._upload_loop(), name="agent-uploads")]

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop firing ticks, end the runs in flight (each is spooled as `abandoned` with
        what it measured), try once more to upload, and say goodbye to the service."""
        self.stopping = True
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        for _, stop in self._running.values():
            stop.set(STOPPED)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_s)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        try:
            async with asyncio.timeout(grace_s):
                await self.upload_spooled()
                await self.client.heartbeat(0, [], self.spool.runs,
                                            self.state.clock_offset_ms, stopping=True)
        except (TimeoutError, Unreachable, Refused):
            pass
        if self.spool.runs:
            logger.warning("%d finished runs stay in the spool (%s) until the agent runs "
                           "again", self.spool.runs, self.spool.directory)
        await self.measurer.aclose()
        if self.otlp is not None:  # the last metrics and spans, bounded in time
            await asyncio.to_thread(self.otlp.shutdown)
        await self.client.aclose()

    @property
    def ready(self) -> bool:
        """Whether the agent takes new runs: started, and its spool has room."""
        return not self.stopping and self.spool.accepting

    # -- heartbeat and assignments -------------------------------------------------------

    async def _beat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.beat()
            except Exception:
                logger.exception("agent heartbeat failed unexpectedly")

    async def beat(self) -> None:
        """One heartbeat; a new assignments version is fetched at once."""
        running = [run_id for run_id, _ in self._running.values() if run_id is not None]
        try:
            answer, sent, received = await self.client.heartbeat(
                len(self._running), running, self.spool.runs, self.state.clock_offset_ms)
        except (Unreachable, Refused) as exc:
            if self.state.reachable:
                logger.warning("the service does not answer (%s): measuring on, offline", exc)
            self.state.reachable = False
            return
        if not self.state.reachable:
            logger.info("the service answers; %d spooled runs to upload", self.spool.runs)
        self.state.reachable = True
        self.state.last_beat = time.monotonic()
        midpoint = sent + (received - sent) / 2
        self.state.clock_offset_ms = (midpoint - answer.server_time).total_seconds() * 1000
        self.state.agent_id = answer.agent_id
        self.state.peers = frozenset(answer.peers)
        for run_id in answer.cancelled:
            for probe_id, (running_id, stop) in list(self._running.items()):
                if running_id == run_id:
                    logger.info("run %s of probe %s cancelled", run_id, probe_id)
                    stop.set(CANCELLED)
        if answer.assignments_version != self.state.version:
            await self.refresh()
        self._wake.set()

    async def refresh(self) -> None:
        """Read the location's probes and make the jobs match them."""
        try:
            found = await self.client.assignments()
        except (Unreachable, Refused) as exc:
            logger.warning("cannot read assignments (%s)", exc)
            return
        wanted = {a.probe.id: a for a in found.probes}
        for probe_id in set(self.assignments) - set(wanted):
            if self._scheduler.get_job(f"probe:{probe_id}") is not None:
                self._scheduler.remove_job(f"probe:{probe_id}")
        for probe_id, assignment in wanted.items():
            old = self.assignments.get(probe_id)
            if old is not None and _timing(old) == _timing(assignment):
                continue
            schedule = schedule_of(assignment)
            self._scheduler.add_job(
                self.run_tick, TickTrigger(schedule, probe_id, assignment.probe.jitter_s),
                args=(probe_id,), id=f"probe:{probe_id}", name=assignment.probe.name,
                replace_existing=True, max_instances=1, coalesce=True,
                misfire_grace_time=int(self._grace_s(schedule)) or 1)
        self.assignments = wanted
        self.state.version = found.version
        logger.info("agent in location %s runs %d probes", found.location, len(wanted))

    def _grace_s(self, schedule: Schedule) -> float:
        return min(MISFIRE_GRACE_S, schedule.period_s(self.clock()) / 2)

    # -- ticks -----------------------------------------------------------------------

    async def run_tick(self, probe_id: int) -> None:
        """APScheduler job: claim the tick and start its run in a task of its own."""
        assignment = self.assignments.get(probe_id)
        if assignment is None or self.stopping:
            return
        schedule = schedule_of(assignment)
        tick = tick_for_firing(schedule, probe_id, assignment.probe.jitter_s,
                               self._grace_s(schedule), self.clock())
        if tick is None:
            return
        if not self.spool.accepting:
            self.state.spool_refused += 1
            logger.warning("spool nearly full (%d bytes): tick %s of probe %s not run",
                           self.spool.bytes, tick, assignment.probe.name)
            return
        if probe_id in self._running:
            logger.warning("tick %s of probe %s skipped: its previous run is still going",
                           tick, assignment.probe.name)
            self.metrics.ticks_skipped.labels(assignment.probe.name, "overlap").inc()
            return
        try:
            claimed = await self.client.claim(
                probe_id, tick, [*self.spool.run_ids(), *sorted(self._ended)])
        except Refused as exc:
            logger.warning("claim of tick %s of probe %s refused (%s)", tick,
                           assignment.probe.name, exc)
            await self.refresh()
            return
        except Unreachable as exc:
            me = self.state.agent_id
            if me is None or not tick_owner(probe_id, tick, me, self.state.peers):
                logger.info("cannot claim tick %s of probe %s (%s); not ours to run offline",
                            tick, assignment.probe.name, exc)
                return
            logger.warning("cannot claim tick %s of probe %s (%s): running it offline",
                           tick, assignment.probe.name, exc)
            run_id = None
        else:
            if claimed.status != "running":
                if claimed.status == "skipped":
                    self.metrics.ticks_skipped.labels(assignment.probe.name, "overlap").inc()
                return
            run_id = claimed.run_id
        if probe_id in self._running:  # a firing raced this one while claiming
            return
        stop = RunStop()
        self._running[probe_id] = (run_id, stop)
        task = asyncio.create_task(self._measure(assignment, tick, run_id, stop),
                                   name=f"agent-run-{probe_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _measure(self, assignment: Assignment, tick: datetime, run_id: int | None,
                       stop: RunStop) -> None:
        """Measure the run and spool it, whatever happens (an error is a failed run)."""
        probe = assignment.probe
        started = self.clock()
        base = RunFinal(run_id=run_id or 0, probe_id=probe.id, scheduled_for=tick,
                        status="failed")
        samples = []
        try:
            if self.limits is not None:
                check_limits(probe.profile, self.limits)
            target = probe_target(assignment.endpoint, assignment.rag_embed,
                                  assignment.rag_rerank)
            result = await self.measurer.measure(
                target, probe.workload, probe.profile, probe.slo, stop=stop,
                budget=None if self.limits is None else self.limits.budget(),
                secrets=self.reach.secrets, datasets=self.reach.datasets)
            final = await asyncio.to_thread(completed, base, result)
            samples = result.samples
            if result.stopped in (CANCELLED, STOPPED):
                final = replace(final, status="cancelled" if result.stopped == CANCELLED
                                else "interrupted", error=result.stopped)
            self.metrics.observe_samples(assignment.endpoint.name, probe.name,
                                         assignment.endpoint.model, samples)
            if self.otlp is not None:
                self.otlp.observe_samples(target, probe.name, samples)
        except (SecretUnavailableError, BeyondLimitsError, DatasetError, TooManyWorkersError,
                WorkerDiedError, WorkloadError) as exc:
            final = replace(base, error=str(exc))
        except asyncio.CancelledError:
            final = replace(base, status="interrupted", error=STOPPED)
        except Exception as exc:
            logger.exception("run of probe %s crashed", probe.name)
            final = replace(base, error=f"internal error: {type(exc).__name__}")
        finally:
            self._running.pop(probe.id, None)
        if run_id is not None:
            self._ended.add(run_id)
        self.metrics.observe_run(probe.name, final.status)
        run = SpooledRun(upload_id=new_upload_id(), probe_id=probe.id, tick=tick.timestamp(),
                         run_id=run_id, started_at=started.timestamp(),
                         dropped=final.samples_dropped,
                         samples=encode_samples(samples), final=encode_final(final))
        try:
            self.spool.put(run)
        except (SpoolFullError, OSError) as exc:
            logger.error("run of probe %s (tick %s) is lost: %s", probe.name, tick, exc)
        finally:
            if run_id is not None:
                self._ended.discard(run_id)
        logger.info("run of probe %s (tick %s, run %s) %s: %d requests", probe.name, tick,
                    run_id if run_id is not None else "offline", final.status, len(samples))
        self._wake.set()

    # -- uploads -------------------------------------------------------------------------

    async def _upload_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(UPLOAD_RETRY_S):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.upload_spooled()
            except Exception:
                logger.exception("uploading spooled runs failed unexpectedly")

    async def upload_spooled(self) -> int:
        """Upload the spooled runs, oldest first, while the service answers; how many it
        took (stored, or known already)."""
        done = 0
        for path, run in self.spool.oldest():
            try:
                answer = await self.client.upload(run)
            except Unreachable:
                return done
            except Refused as exc:
                if exc.status == 409:  # other unfinished uploads of this key hold its bytes
                    logger.warning("the service defers spooled run %s (%s); retrying later",
                                   run.upload_id, exc)
                    return done
                logger.error("the service refuses spooled run %s (%s); set aside as %s",
                             run.upload_id, exc, path.with_suffix(".refused").name)
                path.replace(path.with_suffix(".refused"))
                self.spool.remove(path)
                continue
            if answer.outcome == "part":  # a part went missing on the way: send it all again
                return done
            self.state.uploads[answer.outcome] = self.state.uploads.get(answer.outcome, 0) + 1
            if answer.outcome == "dropped":
                logger.warning("spooled run %s dropped by the service: %s", run.upload_id,
                               answer.detail)
            self.spool.remove(path)
            done += 1
        return done


def _timing(assignment: Assignment) -> tuple[object, ...]:
    probe = assignment.probe
    return (probe.interval_s, probe.cron, probe.jitter_s)


def spool_dir(data_dir: Path, location: str) -> Path:
    return data_dir / "agent-spool" / location
