"""/metrics: Prometheus exposition."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from sustain.service.api.deps import StateDep
from sustain.service.db import alerts as alert_queries
from sustain.service.db import drift as drift_queries
from sustain.service.db import runs as run_queries
from sustain.service.db import slos as slo_queries

router = APIRouter(tags=["metrics"])


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    """Prometheus exposition; the last-run and SLO figures are read from the database first,
    so every replica shows the same."""
    try:
        async with state.api_sessions() as session:
            state.metrics.last_runs.snapshot = await run_queries.last_finished_per_probe(session)
            state.metrics.slos.snapshot = await slo_queries.snapshots(session, datetime.now(UTC))
            state.metrics.alerts.snapshot = await alert_queries.counts_by_state(session)
            state.metrics.drift.snapshot = await drift_queries.ratios(session)
    except Exception:  # noqa: BLE001 - /metrics answers without DB figures
        state.metrics.last_runs.snapshot = ()
        state.metrics.slos.snapshot = ()
        state.metrics.alerts.snapshot = ()
        state.metrics.drift.snapshot = ()
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
