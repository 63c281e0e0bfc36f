"""A replica with an OTLP endpoint configured exports its runs: a run against the simulator
(`sustain simulate`, its own process) reaches the test collector as GenAI histograms with the
endpoint's kind, model and address and the probe's name, and as spans whose trace ids are
the stored samples' trace ids (what the run page shows), flushed when the replica stops."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.service.app import create_app
from tests.conftest import SimulatorHandle
from tests.integration.otlp.conftest import otel_env
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
    wait_for_run,
)
from tests.otlp_receivers import OtlpGrpcReceiver, OtlpHttpReceiver

Receiver = OtlpHttpReceiver | OtlpGrpcReceiver
REQUESTS = 12


@pytest.fixture(params=["grpc", "http/protobuf"])
def receiver(request: pytest.FixtureRequest) -> Iterator[tuple[Receiver, str]]:
    protocol: str = request.param
    with (OtlpGrpcReceiver() if protocol == "grpc" else OtlpHttpReceiver()) as collector:
        yield collector, protocol


async def test_a_replicas_run_is_exported_with_spans_in_its_stored_samples_traces(
        receiver: tuple[Receiver, str], database_url: str, simulator: SimulatorHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    collector, protocol = receiver
    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
             OTEL_EXPORTER_OTLP_PROTOCOL=protocol, OTEL_TRACES_SAMPLER_ARG="1")
    app = create_app(app_settings(database_url, auto_migrate=False, location="eu-test"))
    async with serving(app) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], name="exported", enabled=False,
                                   profile={"kind": "concurrency", "users": 2,
                                            "max_requests": REQUESTS},
                                   workload={"max_tokens": 4})
        run_id = int((await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"])
        run = await wait_for_run(api, run_id)
        assert run["status"] == "succeeded", run
        page = (await api.get(f"/api/v1/runs/{run_id}/samples",
                              params={"limit": 1000})).json()
    # the replica has stopped: its last metrics and its spans were sent
    stored = {sample["trace_id"] for sample in page["items"]}
    assert len(stored) == REQUESTS
    assert None not in stored
    assert {span.trace_id for span in collector.spans()} == stored
    (duration,) = [p for p in collector.histograms()
                   if p.name == "gen_ai.client.operation.duration"]
    assert duration.count == REQUESTS
    assert duration.attributes == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "sim-model", "server.address": "127.0.0.1",
        "server.port": int(simulator.base_url.split(":")[2].split("/")[0]),
        "sustain.probe": "exported", "sustain.location": "eu-test"}
