"""/metrics: Prometheus exposition."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from service.api.deps import StateDep
from service.db import runs as run_queries

router = APIRouter(tags=["metrics"])


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    """Prometheus exposition; the last-run gauges are refreshed from the database first."""
    try:
        async with state.sessions() as session:
            state.metrics.last_runs.snapshot = await run_queries.last_finished_per_probe(session)
    except Exception:
        state.metrics.last_runs.snapshot = ()
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
