"""What the lifespan creates and the routes use; one instance per app."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from sustain.probes.client.clients import HttpClients
from sustain.service.alerting.delivery import DeliveryWorker
from sustain.service.alerting.evaluator import AlertEvaluator
from sustain.service.config import Settings
from sustain.service.config_file.reloader import ConfigReloader
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.writer import SampleWriter
from sustain.service.metrics import Metrics
from sustain.service.scheduling.executor import RunExecutor
from sustain.service.scheduling.listener import ProbeListener
from sustain.service.scheduling.liveness import Liveness
from sustain.service.scheduling.scheduler import ProbeScheduler


@dataclass(slots=True)
class AppState:
    settings: Settings
    database_url: str
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    clients: HttpClients
    metrics: Metrics
    buffer: SampleBuffer
    writer: SampleWriter
    executor: RunExecutor
    scheduler: ProbeScheduler
    liveness: Liveness
    listener: ProbeListener
    reloader: ConfigReloader | None
    alerts: AlertEvaluator
    delivery: DeliveryWorker
    stopping: bool = False
    """Shutdown has begun: /readyz answers 503 while runs in flight finish."""
