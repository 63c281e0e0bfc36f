"""The agent's own HTTP face, on a port of its host: /healthz, /readyz (503 while its spool
is nearly full or it is stopping, with the spool's fill and bound) and /metrics (its request
counters and histograms, labelled with its location, and its spool, uploads, clock offset
and reach of the service). Nothing here takes a request from outside that changes anything."""

from __future__ import annotations

import time
from collections.abc import Iterable

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sustain.service.agent.agent import Agent

UPLOAD_OUTCOMES = ("stored", "duplicate", "partition", "dropped")


class AgentCollector(Collector):
    """The agent's spool, uploads, clock offset and reach of the service."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        return list(self._families(fill=True))

    def _families(self, fill: bool = False) -> Iterable[Metric]:
        agent, state = self.agent, self.agent.state
        spool = agent.spool
        runs = GaugeMetricFamily("sustain_agent_spool_runs",
                                 "Finished runs on the agent's disk, not yet uploaded.")
        size = GaugeMetricFamily("sustain_agent_spool_bytes", "Bytes the spool holds.")
        bound = GaugeMetricFamily("sustain_agent_spool_capacity_bytes",
                                  "The spool's bound: at 90 % no new run starts.")
        uploads = CounterMetricFamily(
            "sustain_agent_uploads", "Spooled runs the service took, by its answer: stored, "
            "duplicate (stored before), partition (measured elsewhere too), dropped.",
            labels=["outcome"])
        reachable = GaugeMetricFamily("sustain_agent_service_reachable",
                                      "1 while the service answers heartbeats.")
        offset = GaugeMetricFamily(
            "sustain_agent_clock_offset_seconds",
            "This host's wall clock minus the service's, measured at the last heartbeat "
            "(reported only: latencies come from the monotonic clock).")
        refused = CounterMetricFamily("sustain_agent_spool_refused_ticks",
                                      "Ticks not run because the spool was nearly full.")
        if fill:
            runs.add_metric([], spool.runs)
            size.add_metric([], spool.bytes)
            bound.add_metric([], spool.max_bytes)
            for outcome in UPLOAD_OUTCOMES:
                uploads.add_metric([outcome], state.uploads.get(outcome, 0))
            reachable.add_metric([], 1.0 if state.reachable else 0.0)
            if state.clock_offset_ms is not None:
                offset.add_metric([], state.clock_offset_ms / 1000.0)
            refused.add_metric([], state.spool_refused)
        yield from (runs, size, bound, uploads, reachable, offset, refused)


def status_app(agent: Agent) -> FastAPI:
    agent.metrics.registry.register(AgentCollector(agent))
    app = FastAPI(title="sustain agent", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        state = agent.state
        body = {
            "status": "ready" if agent.ready else "not ready",
            "location": agent.location,
            "service_reachable": state.reachable,
            "last_heartbeat_age_s": None if state.last_beat is None
            else round(time.monotonic() - state.last_beat, 3),
            "spool": {"runs": agent.spool.runs, "bytes": agent.spool.bytes,
                      "capacity_bytes": agent.spool.max_bytes,
                      "accepting": agent.spool.accepting},
            "clock_offset_ms": state.clock_offset_ms,
            "probes": len(agent.assignments),
        }
        return JSONResponse(body, status_code=200 if agent.ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(agent.metrics.registry),
                        media_type=CONTENT_TYPE_LATEST)

    return app
