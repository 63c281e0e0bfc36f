"""Everything one replica runs, built in one place and started and stopped in order.

A replica is: the database engines and sessions (one for measuring, storing and the background
loops; one for the REST API and pages, so readers can never take the connections that samples
are stored through), the probe HTTP clients, the sample buffer and
its writer, the run executor, heartbeats (liveness), the probe scheduler and its LISTEN/NOTIFY
listener, the config-file reloader, the alert evaluator and the notification delivery worker.
The FastAPI app (sustain.service.app) only starts and stops a Replica; routes read it. Nothing
here knows about HTTP routes, so the API and the status page depend on the runtime, never the
reverse.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.egress_connect import egress_client
from sustain.probes.runner import InProcess, Measurer
from sustain.probes.workers.pool import WorkerPool
from sustain.service.alerting.delivery import DeliveryPolicy, DeliveryWorker
from sustain.service.alerting.evaluator import AlertEvaluator, DriftWatch
from sustain.service.config import Settings
from sustain.service.config_file.reloader import ConfigReloader
from sustain.service.db.engine import (
    create_api_engine,
    create_engine,
    safe_url,
    session_factory,
)
from sustain.service.db.migrate import upgrade_to_head
from sustain.service.evaluation.drift_watch import parse_watched
from sustain.service.export.slots import ExportSlots
from sustain.service.history.windows import parse_duration
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.writer import SampleWriter
from sustain.service.metrics import Metrics
from sustain.service.otlp.run_target import TargetNoting
from sustain.service.otlp.setup import otlp_configured, start_export
from sustain.service.scheduling.executor import RunExecutor
from sustain.service.scheduling.listener import ProbeListener
from sustain.service.scheduling.liveness import Liveness, PeerLoads
from sustain.service.scheduling.scheduler import ProbeScheduler

logger = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 10.0
"""At shutdown, how long buffered samples may wait for the database."""


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def external_url(settings: Settings) -> str:
    """Where users reach this service: the setting, or the address it binds."""
    if settings.external_url is not None:
        return settings.external_url
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.port}"


def drift_watch(settings: Settings) -> DriftWatch:
    """Which drift findings the alert evaluator keeps fresh, and how often."""
    return DriftWatch(
        window=timedelta(seconds=parse_duration(settings.drift_window)),
        baseline=timedelta(seconds=parse_duration(settings.drift_baseline)),
        watched=tuple(parse_watched(settings.drift_metrics)),
        every=timedelta(seconds=settings.drift_evaluation_s))


class Replica:
    """One replica's collaborators. Constructing it does no I/O; `start` migrates (when
    settings.auto_migrate), connects and starts the background loops; `drain` stops taking
    work; `stop` closes everything in the reverse order."""

    def __init__(self, settings: Settings, database_url: str) -> None:
        self.settings = settings
        self.database_url = database_url
        self.replica_id = settings.replica_id or default_replica_id()
        self.engine: AsyncEngine = create_engine(database_url,
                                                 pool_size=settings.database_pool_size)
        self.sessions: async_sessionmaker[AsyncSession] = session_factory(self.engine)
        """Measuring, storing, the scheduler, liveness, alerting and maintenance: never a
        route (they use api_engine / api_sessions)."""
        self.api_engine: AsyncEngine = create_api_engine(
            database_url, pool_size=settings.database_api_pool_size)
        self.api_sessions: async_sessionmaker[AsyncSession] = session_factory(self.api_engine)
        """The REST API's and pages' sessions (SessionDep, authentication, the audit log,
        /readyz, /metrics): at most database_api_pool_size connections; a request that
        waits past API_POOL_TIMEOUT_S for one is answered 503."""
        self.exports = ExportSlots(settings.export_max_concurrent_per_key,
                                   settings.export_max_concurrent)
        """Sample exports in flight (the API takes a slot per CSV stream or JSON page)."""
        self.reach = settings.reach(database_url)
        """What probes and notifiers may read and reach (checked at create and again at use)."""
        self.clients = HttpClients(settings.http_max_connections, egress=self.reach.egress)
        workers = settings.worker_processes()
        self.measurer: Measurer = InProcess(self.clients) if workers == 0 else WorkerPool(
            workers, max_connections=settings.http_max_connections, egress=self.reach.egress)
        """Where runs measure: worker processes (started on first use), never this process's
        loop unless SUSTAIN_MEASURE_WORKERS=0."""
        if otlp_configured():  # OpenTelemetry export reads each run's target (service/otlp)
            self.measurer = TargetNoting(self.measurer)
        self.metrics = Metrics(settings.location)
        self.buffer = SampleBuffer(settings.buffer_samples)
        self.writer = SampleWriter(self.engine, self.buffer,
                                   on_batch=self.metrics.db_write.observe)
        self.metrics.watch_writes(self.buffer, self.writer)
        self.peers = PeerLoads()
        self.executor = RunExecutor(self.sessions, self.measurer, self.metrics, self.replica_id,
                                    self.buffer, self.peers, settings.load_limits(),
                                    reach=self.reach, refusals=self.writer.refusals,
                                    location=settings.location)
        self.liveness = Liveness(self.engine, self.replica_id, settings.heartbeat_s,
                                 lambda: self.executor.in_flight, self.executor.run_ids,
                                 self.peers, location=settings.location)
        self.scheduler = ProbeScheduler(self.executor, self.sessions, self.engine, settings)
        self.listener = ProbeListener(database_url, self.scheduler.refresh,
                                      self.scheduler.reconcile)
        self.reloader = None if settings.config is None else ConfigReloader(
            settings.config, self.sessions, self.scheduler, self.metrics,
            settings.config_reload_s, settings.sample_retention_days,
            settings.load_limits(), reach=self.reach,
            expandable=settings.config_expansion(database_url))
        self.notify_client = egress_client(self.reach.egress, trust_env=True)
        self.delivery = DeliveryWorker(
            self.sessions, self.notify_client, self.replica_id, external_url(settings),
            DeliveryPolicy(poll_s=settings.notify_poll_s,
                           max_attempts=settings.notify_max_attempts,
                           retry_max_s=settings.notify_retry_max_s,
                           resend_s=settings.alertmanager_resend_s,
                           max_response_bytes=settings.notify_max_response_bytes,
                           max_silences=settings.max_silences),
            observe=self.metrics.observe_notification, reach=self.reach)
        self.alerts = AlertEvaluator(
            self.sessions, self.replica_id, settings.alert_evaluation_s,
            settings.alert_repeat_s, settings.endpoint_down_runs, drift_watch(settings),
            on_transition=self.delivery.wake)
        self.stopping = False
        """Shutdown has begun: /readyz answers 503 while runs in flight finish."""

    async def start(self) -> None:
        """Migrate (when configured), then start every loop; ready when this returns."""
        if self.settings.auto_migrate:
            await asyncio.to_thread(upgrade_to_head, self.database_url)
        self.metrics.otlp = start_export(self.settings.location)
        self.writer.start()
        self.executor.start()
        await self.liveness.beat()
        self.liveness.start()
        self.listener.start()
        if self.reloader is not None:
            await self.reloader.reload(strict=True)
            self.reloader.start()
        await self.scheduler.start()
        self.alerts.start()
        self.delivery.start()
        gc.freeze()  # what exists now lives as long as the replica: full collections skip it
        logger.info("sustain replica %s (location %s) ready on database %s", self.replica_id,
                    self.settings.location,
                    safe_url(self.database_url))

    def stopped_loops(self) -> list[str]:
        """The background loops of a started replica that no longer run (each is meant to
        outlive any failure until `stop`): for /readyz, which reports the scheduler itself."""
        loops = {"heartbeat": self.liveness.alive,
                 "probe listener": self.listener.alive, "cancel watcher": self.executor.alive,
                 "alert evaluation": self.alerts.alive,
                 "notification delivery": self.delivery.alive}
        return [name for name, running in loops.items() if not running]

    async def drain(self) -> None:
        """Stop taking work and wait for the runs in flight, up to the shutdown grace."""
        self.stopping = True
        self.liveness.stopping = True
        self.scheduler.pause()
        self.executor.stop_claiming()
        grace = self.settings.shutdown_grace_s
        logger.info("shutting down: waiting up to %ss for %d runs in flight", grace,
                    self.executor.in_flight)
        if not await self.executor.drain(grace):
            logger.warning("shutdown grace of %ss over; runs still going will be interrupted",
                           grace)

    async def stop(self) -> None:
        """Close in reverse order of dependence; buffered samples get FLUSH_TIMEOUT_S."""
        await self.alerts.close()
        await self.delivery.close()
        await self.notify_client.aclose()
        if self.reloader is not None:
            await self.reloader.close()
        await self.listener.close()
        await self.scheduler.shutdown()
        await self.executor.close()
        await self.writer.close(FLUSH_TIMEOUT_S)
        await self.liveness.close()
        await self.measurer.aclose()
        if self.metrics.otlp is not None:  # the last metrics and spans, bounded in time
            await asyncio.to_thread(self.metrics.otlp.shutdown)
        await self.clients.aclose()
        await self.api_engine.dispose()
        await self.engine.dispose()
