"""The FastAPI app. Its lifespan owns every resource: engine, HTTP clients, scheduler."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
from fastapi import APIRouter, FastAPI

from sustain.probes.client.clients import HttpClients
from sustain.service.alerting.delivery import DeliveryPolicy, DeliveryWorker
from sustain.service.alerting.drift_findings import parse_watched
from sustain.service.alerting.evaluator import AlertEvaluator, DriftWatch
from sustain.service.api.errors import install_error_handlers
from sustain.service.api.routes import (
    alerts as alert_routes,
)
from sustain.service.api.routes import (
    deliveries,
    drift,
    endpoints,
    health,
    history,
    metrics,
    notifiers,
    probes,
    replicas,
    runs,
    silences,
    slos,
)
from sustain.service.api.state import AppState
from sustain.service.config import Settings
from sustain.service.config_file.reloader import ConfigReloader
from sustain.service.db.engine import create_engine, safe_url, session_factory
from sustain.service.db.migrate import upgrade_to_head
from sustain.service.history.windows import parse_duration
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.writer import SampleWriter
from sustain.service.metrics import Metrics
from sustain.service.scheduling.executor import RunExecutor
from sustain.service.scheduling.listener import ProbeListener
from sustain.service.scheduling.liveness import Liveness
from sustain.service.scheduling.scheduler import ProbeScheduler
from sustain.service.web import routes as web_routes

logger = logging.getLogger(__name__)

API_PREFIX = "/api/v1"
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
    return DriftWatch(
        window=timedelta(seconds=parse_duration(settings.drift_window)),
        baseline=timedelta(seconds=parse_duration(settings.drift_baseline)),
        watched=tuple(parse_watched(settings.drift_metrics)),
        every=timedelta(seconds=settings.drift_evaluation_seconds))


def create_app(settings: Settings, database_url: str | None = None) -> FastAPI:
    """The app for `settings`. `database_url` overrides settings.database_url (the CLI passes
    the embedded server's URL here)."""
    url = database_url or settings.database_url
    if url is None:
        raise ValueError("create_app needs a database URL (start the embedded server first)")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.auto_migrate:
            await asyncio.to_thread(upgrade_to_head, url)
        engine = create_engine(url)
        sessions = session_factory(engine)
        clients = HttpClients(settings.http_max_connections)
        app_metrics = Metrics()
        buffer = SampleBuffer(settings.buffer_samples)
        writer = SampleWriter(engine, buffer, on_batch=app_metrics.db_write.observe)
        app_metrics.watch_writes(buffer, writer)
        replica_id = settings.replica_id or default_replica_id()
        executor = RunExecutor(sessions, clients, app_metrics, replica_id, buffer)
        liveness = Liveness(engine, replica_id, settings.heartbeat_seconds,
                            lambda: executor.in_flight, executor.run_ids)
        executor.other_loads = lambda: liveness.others
        scheduler = ProbeScheduler(executor, sessions, engine, settings)
        listener = ProbeListener(url, scheduler.refresh, scheduler.reconcile)
        reloader = None if settings.config is None else ConfigReloader(
            settings.config, sessions, scheduler, app_metrics, settings.config_reload_seconds,
            settings.sample_retention_days)
        notify_client = httpx.AsyncClient(follow_redirects=False)
        delivery = DeliveryWorker(
            sessions, notify_client, replica_id, external_url(settings),
            DeliveryPolicy(poll_s=settings.notify_poll_seconds,
                           max_attempts=settings.notify_max_attempts,
                           retry_max_s=settings.notify_retry_max_seconds,
                           resend_s=settings.alertmanager_resend_seconds),
            observe=app_metrics.observe_notification)
        alerts = AlertEvaluator(
            sessions, replica_id, settings.alert_evaluation_seconds,
            settings.alert_repeat_seconds, settings.endpoint_down_runs, drift_watch(settings),
            on_transition=delivery.wake)
        app.state.sustain = AppState(settings, url, engine, sessions, clients, app_metrics,
                                     buffer, writer, executor, scheduler, liveness, listener,
                                     reloader, alerts, delivery)
        writer.start()
        try:
            await liveness.beat()
            liveness.start()
            listener.start()
            if reloader is not None:
                await reloader.reload(strict=True)
                reloader.start()
            await scheduler.start()
            alerts.start()
            delivery.start()
            gc.freeze()  # what exists now lives as long as the app: full collections skip it
            logger.info("sustain replica %s ready on database %s", replica_id, safe_url(url))
            yield
        finally:
            await alerts.close()
            await delivery.close()
            await notify_client.aclose()
            if reloader is not None:
                await reloader.close()
            await listener.close()
            await scheduler.shutdown()
            await executor.close()
            await writer.close(FLUSH_TIMEOUT_S)
            await liveness.close()
            await clients.aclose()
            await engine.dispose()

    app = FastAPI(
        title="sustain",
        summary="Continuous monitoring of LLM inference endpoints.",
        version="0.1.0",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    api = APIRouter(prefix=API_PREFIX)
    for module in (endpoints, probes, history, drift, runs, replicas, slos, alert_routes,
                   silences, notifiers, deliveries):
        api.include_router(module.router)
    app.include_router(api)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(web_routes.router)
    return app
