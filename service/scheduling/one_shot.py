"""A one-shot run (`sustain probe`): one endpoint, workload, load profile and SLO, validated
as the REST API validates them, measured now in this process or its worker processes.

The command turns its flags into a OneShot (sustain.service.cli.oneshot); what the run may
reach and read, and how it is measured, are here, so a one-shot run and a scheduled one
differ only in who asked.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.target import Target
from sustain.probes.load.live import LiveStats
from sustain.probes.load.profiles import LoadProfile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.run_result import RunResult
from sustain.probes.runner import InProcess, Measurer, RunBudget
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from sustain.service.scheduling.targets import probe_target
from sustain.service.schemas.endpoints import EndpointCreate

EGRESS = EgressPolicy()
"""A one-shot run reaches what the service reaches by default: anything but link-local and
cloud metadata addresses, judged on the URL and again on the resolved addresses."""
DATASETS = DatasetPolicy.unrestricted()
"""A one-shot run reads its user's own files, from anywhere but /proc, /sys and /dev, up to
the default size cap."""
PROGRESS_EVERY_S = 0.25
"""Seconds between calls of a run's `on_progress` (four times a second)."""

Progress = Callable[[LiveStats, float], None]
"""Called with the run's live figures and the seconds since it began."""


def endpoint_name(base_url: str) -> str:
    """A stable name for an ad-hoc endpoint, from its host and port."""
    parts = urlsplit(base_url)
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{parts.hostname or 'endpoint'}-{parts.port or ''}")
    return ("cli-" + host.strip("-"))[:100]


@dataclass(frozen=True, slots=True)
class OneShot:
    """A validated one-shot run."""

    endpoint: EndpointCreate
    profile: LoadProfile
    workload: Workload
    slo: SloThresholds
    rag: tuple[EndpointCreate, EndpointCreate | None] | None = None
    """A RAG probe's embeddings and rerank endpoints."""

    @property
    def target(self) -> Target:
        return probe_target(self.endpoint, *(self.rag or ()))

    @property
    def secrets(self) -> SecretPolicy:
        """The variables its user named with --api-key-env and --rag-pgvector-env may be read
        (never sustain's own, SUSTAIN_* and database variables: the secret policy's fixed
        refusals hold)."""
        refs = [self.endpoint.auth_secret_ref,
                None if self.workload.rag is None else self.workload.rag.pgvector_dsn_ref]
        return SecretPolicy(env_globs=tuple(ref.partition(":")[2] for ref in refs
                                            if ref is not None))


async def run_one_shot(shot: OneShot, on_progress: Progress | None = None,
                       max_connections: int = 1000, budget: RunBudget | None = None
                       ) -> RunResult:
    """Run the one-shot (held to `budget`), calling `on_progress` every PROGRESS_EVERY_S
    while it goes. With `workers` above 1 in its profile it measures in that many worker
    processes, each on its share of the load; otherwise on this process's loop, which does
    nothing else meanwhile."""
    live = LiveStats()
    started = time.monotonic()
    async with HttpClients(max_connections, egress=EGRESS) as clients:
        measurer: Measurer = InProcess(clients)
        if shot.profile.workers > 1:
            measurer = WorkerPool(shot.profile.workers, max_connections=max_connections,
                                  egress=EGRESS)
        try:
            return await _reported(measurer.measure(
                shot.target, shot.workload, shot.profile, shot.slo, live=live, budget=budget,
                secrets=shot.secrets, datasets=DATASETS), live, on_progress, started)
        finally:
            await measurer.aclose()


async def _reported(work: Coroutine[Any, Any, RunResult], live: LiveStats,
                    on_progress: Progress | None, started: float) -> RunResult:
    """`work`'s result, with `on_progress` called every PROGRESS_EVERY_S meanwhile."""
    run = asyncio.create_task(work)
    try:
        while not run.done():
            if on_progress is not None:
                on_progress(live, time.monotonic() - started)
            await asyncio.wait({run}, timeout=PROGRESS_EVERY_S)
    finally:
        if not run.done():
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
    return run.result()
