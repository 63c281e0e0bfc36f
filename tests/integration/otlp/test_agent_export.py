"""An agent with an OTLP endpoint configured exports the runs it measures, under its own
location, with spans in its uploaded samples' traces, flushed when it stops."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import SimulatorHandle
from tests.integration.otlp.conftest import otel_env
from tests.integration.service.helpers import create_endpoint, create_probe, serving
from tests.integration.service.test_agents import (
    LOCATION,
    agent_key,
    fast_app,
    listening,
    new_agent,
    succeeded,
)
from tests.otlp_receivers import OtlpHttpReceiver


async def test_an_agents_runs_are_exported_under_its_location(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = fast_app(database_url)
    with OtlpHttpReceiver() as collector:
        async with serving(app) as api, listening(app) as port:
            key = await agent_key(api)
            endpoint = await create_endpoint(api, simulator.base_url)
            probe = await create_probe(api, endpoint["id"], name="far", interval_s=1,
                                       locations=[LOCATION],
                                       profile={"kind": "constant", "rate": 20,
                                                "duration_s": 0.2})
            otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                     OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                     OTEL_TRACES_SAMPLER_ARG="1")
            agent = new_agent(port, key, tmp_path / "spool")
            await agent.start()
            try:
                async with asyncio.timeout(60):  # hang guard
                    while not await succeeded(api, probe["id"]):  # noqa: ASYNC110
                        await asyncio.sleep(0.2)
            finally:
                await agent.stop()  # flushes the agent's metrics and spans
            stored: set[str] = set()
            for run in await succeeded(api, probe["id"]):
                page = (await api.get(f"/api/v1/runs/{run['id']}/samples",
                                      params={"limit": 1000})).json()
                stored |= {s["trace_id"] for s in page["items"]}
    spans = {span.trace_id for span in collector.spans()
             if span.attributes["sustain.location"] == LOCATION}
    assert stored
    assert None not in stored
    assert stored <= spans  # a run may have ended, unstored, as the agent stopped
    durations = [p for p in collector.histograms()
                 if p.name == "gen_ai.client.operation.duration"]
    assert {(p.attributes["sustain.location"], p.attributes["sustain.probe"])
            for p in durations} == {(LOCATION, "far")}
    assert sum(p.count for p in durations) == len(spans)
