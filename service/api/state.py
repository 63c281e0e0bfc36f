"""What the lifespan creates and the routes use; one instance per app."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from probes.client.clients import HttpClients
from service.alerting.delivery import DeliveryWorker
from service.alerting.evaluator import AlertEvaluator
from service.config import Settings
from service.config_file.reloader import ConfigReloader
from service.ingest.buffer import SampleBuffer
from service.ingest.writer import SampleWriter
from service.metrics import Metrics
from service.scheduling.executor import RunExecutor
from service.scheduling.listener import ProbeListener
from service.scheduling.liveness import Liveness
from service.scheduling.scheduler import ProbeScheduler


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
