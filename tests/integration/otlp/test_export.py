"""A finished run's requests reach an OTLP collector, over gRPC and over HTTP, as the GenAI
semantic conventions' client histograms (their names, units, bucket boundaries and
attributes) and as spans of a sampled share of them, each span in the trace its request's
`traceparent` started; a collector that stalls or is down never holds a run or a stop; no
key reaches the logs."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.client.trace_context import span_id_of
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.measure.sample import ErrorClass, Sample
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.service.otlp.metrics import LATENCY_BUCKETS_S, TOKEN_BUCKETS
from sustain.service.otlp.setup import OtlpExport, start_export
from sustain.service.otlp.spans import unix_ns
from sustain.simulator.config import FAULT_HEADER, Fault
from sustain.simulator.server import BackgroundSimulator
from tests.integration.otlp.conftest import TOKENS, otel_env
from tests.otlp_receivers import HistogramPoint, OtlpGrpcReceiver, OtlpHttpReceiver

REQUESTS = 24
SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2
NAMES_AND_UNITS = {
    "gen_ai.client.operation.duration": "s",
    "gen_ai.client.token.usage": "{token}",
    "gen_ai.client.operation.time_to_first_chunk": "s",
    "gen_ai.client.operation.time_per_output_chunk": "s",
}

Receiver = OtlpHttpReceiver | OtlpGrpcReceiver


@pytest.fixture(params=["grpc", "http/protobuf"])
def receiver(request: pytest.FixtureRequest) -> Iterator[tuple[Receiver, str]]:
    """A test collector, and the OTEL_EXPORTER_OTLP_PROTOCOL that reaches it."""
    protocol: str = request.param
    with (OtlpGrpcReceiver() if protocol == "grpc" else OtlpHttpReceiver()) as collector:
        yield collector, protocol


async def measured(clients: HttpClients, target: Target, requests: int = REQUESTS
                   ) -> list[Sample]:
    result = await execute(clients, target, Workload(input_tokens=16),
                           ConcurrencyProfile(users=2, max_requests=requests))
    return list(result.samples)


def started(location: str = "test-location") -> OtlpExport:
    export = start_export(location)
    assert export is not None
    return export


def chat(sim: BackgroundSimulator, **headers: str) -> Target:
    return Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="sim-model",
                  headers=headers)


def points(collector: Receiver, name: str) -> list[HistogramPoint]:
    return [point for point in collector.histograms() if point.name == name]


async def test_a_runs_requests_reach_the_collector_as_the_genai_client_histograms(
        receiver: tuple[Receiver, str], sim: BackgroundSimulator, clients: HttpClients,
        monkeypatch: pytest.MonkeyPatch) -> None:
    collector, protocol = receiver
    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
             OTEL_EXPORTER_OTLP_PROTOCOL=protocol, OTEL_TRACES_EXPORTER="none")
    target = chat(sim)
    samples = await measured(clients, target)
    export = started()
    export.observe_samples(target, "chat-probe", samples)
    export.shutdown()

    assert all(s.measurement.error_class is None for s in samples)
    found = collector.histograms()
    assert {(p.name, p.unit) for p in found} == set(NAMES_AND_UNITS.items())
    port = int(sim.base_url.split(":")[2].split("/")[0])
    common = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
              "gen_ai.request.model": "sim-model", "server.address": "127.0.0.1",
              "server.port": port, "sustain.probe": "chat-probe",
              "sustain.location": "test-location"}
    (duration,) = points(collector, "gen_ai.client.operation.duration")
    assert duration.attributes == common
    assert duration.count == REQUESTS
    assert duration.sum == pytest.approx(sum(s.e2e_ms for s in samples) / 1000)
    assert duration.bounds == LATENCY_BUCKETS_S
    assert sum(duration.bucket_counts) == REQUESTS
    tokens = {p.attributes["gen_ai.token.type"]: p
              for p in points(collector, "gen_ai.client.token.usage")}
    assert {name: {k: v for k, v in p.attributes.items() if k != "gen_ai.token.type"}
            for name, p in tokens.items()} == {"input": common, "output": common}
    assert tokens["output"].count == REQUESTS
    assert tokens["output"].sum == REQUESTS * TOKENS
    assert tokens["input"].sum == sum(s.measurement.input_tokens or 0 for s in samples) > 0
    assert tokens["input"].bounds == TOKEN_BUCKETS
    (first,) = points(collector, "gen_ai.client.operation.time_to_first_chunk")
    assert first.count == REQUESTS
    assert first.sum == pytest.approx(sum(s.ttft_ms or 0 for s in samples) / 1000)
    (chunks,) = points(collector, "gen_ai.client.operation.time_per_output_chunk")
    assert chunks.count == sum(len(s.measurement.itl_ms) for s in samples) == \
        REQUESTS * (TOKENS - 1)
    assert collector.spans() == []


async def test_each_sampled_requests_span_is_in_the_trace_its_traceparent_started(
        receiver: tuple[Receiver, str], sim: BackgroundSimulator, clients: HttpClients,
        monkeypatch: pytest.MonkeyPatch) -> None:
    collector, protocol = receiver
    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
             OTEL_EXPORTER_OTLP_PROTOCOL=protocol, OTEL_TRACES_SAMPLER_ARG="1",
             OTEL_METRICS_EXPORTER="none")
    target = chat(sim)
    samples = await measured(clients, target)
    export = started()
    export.observe_samples(target, "chat-probe", samples)
    export.shutdown()

    spans = {span.trace_id: span for span in collector.spans()}
    by_trace = {s.measurement.trace_id: s for s in samples}
    assert len(by_trace) == REQUESTS
    assert None not in by_trace
    assert spans.keys() == by_trace.keys()
    for trace_id, span in spans.items():
        sample = by_trace[trace_id]
        assert span.name == "chat sim-model"
        assert span.kind == SPAN_KIND_CLIENT
        assert span.parent_span_id == ""
        assert span.span_id == span_id_of(trace_id), "the parent id its traceparent sent"
        assert span.start_ns == unix_ns(sample.sent_at)
        assert span.end_ns - span.start_ns == round(sample.e2e_ms * 1_000_000)
        assert span.attributes["sustain.seq"] == sample.seq
        assert span.attributes["gen_ai.usage.output_tokens"] == TOKENS
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.resource["service.name"] == "sustain"
    assert collector.histograms() == []


async def test_a_failed_request_counts_under_its_error_type_and_its_span_is_an_error(
        sim: BackgroundSimulator, clients: HttpClients,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpHttpReceiver() as collector:
        otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_TRACES_SAMPLER_ARG="1")
        target = chat(sim, **{FAULT_HEADER: Fault.HTTP_500.value})
        samples = await measured(clients, target, requests=4)
        export = started()
        export.observe_samples(target, "failing", samples)
        export.shutdown()

    assert {s.measurement.error_class for s in samples} == {ErrorClass.HTTP_5XX}
    (duration,) = points(collector, "gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "http_5xx"
    assert duration.count == 4
    assert points(collector, "gen_ai.client.token.usage") == []
    assert points(collector, "gen_ai.client.operation.time_to_first_chunk") == []
    spans = collector.spans()
    assert len(spans) == 4
    assert {(s.status_code, s.attributes["error.type"], s.attributes["http.response.status_code"])
            for s in spans} == {(STATUS_ERROR, "http_5xx", 500)}


async def test_a_collector_that_stalls_holds_neither_the_recording_nor_the_stop(
        sim: BackgroundSimulator, clients: HttpClients,
        monkeypatch: pytest.MonkeyPatch) -> None:
    stall_s = 30.0
    with OtlpHttpReceiver() as collector:
        collector.stall_s = stall_s
        otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_TRACES_SAMPLER_ARG="1",
                 OTEL_METRIC_EXPORT_INTERVAL="50", OTEL_BSP_SCHEDULE_DELAY="50")
        target = chat(sim)
        samples = await measured(clients, target, requests=8)
        export = started()
        began = time.monotonic()
        for _ in range(3):  # the exporting threads are now waiting on the collector
            export.observe_samples(target, "stalled", samples)
            await asyncio.sleep(0.2)
        export.shutdown(timeout_s=1.0)
        took = time.monotonic() - began
        assert collector.all_headers(), "the exporters did reach the stalled collector"
    assert took < stall_s / 3


async def test_a_collector_that_is_down_leaves_the_run_recorded_and_the_stop_bounded(
        sim: BackgroundSimulator, clients: HttpClients,
        monkeypatch: pytest.MonkeyPatch) -> None:
    closed = OtlpHttpReceiver()
    with closed:
        port = closed.port  # free again once it stops: nothing listens there
    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
             OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_TRACES_SAMPLER_ARG="1")
    target = chat(sim)
    samples = await measured(clients, target, requests=8)
    export = started()
    export.observe_samples(target, "unheard", samples)
    assert export.metrics is not None
    assert export.metrics.recorded >= 8
    assert export.spans is not None
    assert export.spans.spans == 8
    began = time.monotonic()
    export.shutdown(timeout_s=1.0)
    assert time.monotonic() - began < 15.0


async def test_no_key_or_endpoint_credential_reaches_the_logs_when_the_collector_refuses(
        sim: BackgroundSimulator, clients: HttpClients, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    key, password = "collector-key-5ecr3t", "pa55-w0rd-5ecr3t"
    with OtlpHttpReceiver() as collector:
        collector.statuses = [401] * 10
        otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint.replace(
                     "http://", f"http://user:{password}@"),
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_TRACES_SAMPLER_ARG="1",
                 OTEL_EXPORTER_OTLP_HEADERS=f"x-api-key={key}")
        target = chat(sim)
        samples = await measured(clients, target, requests=4)
        with caplog.at_level(logging.DEBUG):
            export = started()
            export.observe_samples(target, "keyed", samples)
            export.shutdown()
        sent = collector.all_headers()
    assert sent
    assert all(h.get("x-api-key") == key for h in sent)
    assert "401" in caplog.text  # the refusal was logged...
    assert key not in caplog.text
    assert password not in caplog.text


def test_export_is_off_without_an_otlp_endpoint_and_per_signal_with_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    otel_env(monkeypatch)
    assert start_export("here") is None
    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
             OTEL_SDK_DISABLED="true")
    assert start_export("here") is None
    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:9/v1/traces",
             OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    traces_only = started()
    assert traces_only.metrics is None
    assert traces_only.spans is not None
    traces_only.shutdown(timeout_s=1.0)
    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
             OTEL_TRACES_EXPORTER="none")
    metrics_only = started()
    assert metrics_only.metrics is not None
    assert metrics_only.spans is None
    metrics_only.shutdown(timeout_s=1.0)


def test_an_unknown_protocol_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sustain.service.otlp.setup import OtlpConfigError

    otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
             OTEL_EXPORTER_OTLP_PROTOCOL="http/json")
    with pytest.raises(OtlpConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        start_export("here")


def sampled_by_ratio(trace_ids: Sequence[str], share: float) -> set[str]:
    """The trace ids a ratio sampler of `share` keeps: the low 64 bits under share * 2^64
    (the OpenTelemetry specification's TraceIdRatioBased)."""
    bound = round(share * 2**64)
    return {t for t in trace_ids if int(t, 16) & (2**64 - 1) < bound}


async def test_the_default_share_of_spans_is_a_tenth_of_requests_chosen_by_trace_id(
        sim: BackgroundSimulator, clients: HttpClients,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpHttpReceiver() as collector:
        otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_METRICS_EXPORTER="none")
        target = chat(sim)
        samples = await measured(clients, target, requests=200)
        export = started()
        export.observe_samples(target, "sampled", samples)
        export.shutdown()
    trace_ids = [s.measurement.trace_id for s in samples if s.measurement.trace_id]
    expected = sampled_by_ratio(trace_ids, 0.1)
    assert {span.trace_id for span in collector.spans()} == expected
    assert 0 < len(expected) < len(trace_ids) / 2


async def test_spans_of_one_run_stop_at_the_span_queues_size(
        sim: BackgroundSimulator, clients: HttpClients,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpHttpReceiver() as collector:
        otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_TRACES_SAMPLER_ARG="1",
                 OTEL_BSP_MAX_QUEUE_SIZE="5", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="5",
                 OTEL_METRICS_EXPORTER="none")
        target = chat(sim)
        samples = await measured(clients, target, requests=12)
        export = started()
        export.observe_samples(target, "bounded", samples)
        export.shutdown()
    assert len(collector.spans()) == 5


def test_an_env_sampler_decides_as_the_sdk_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    from sustain.probes.measure.sample import Measurement
    from sustain.service.otlp.attributes import run_attributes

    with OtlpHttpReceiver() as collector:
        otel_env(monkeypatch, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_TRACES_SAMPLER="always_off",
                 OTEL_TRACES_SAMPLER_ARG="1", OTEL_METRICS_EXPORTER="none")
        export = started()
        assert export.spans is not None
        run = run_attributes(Target(base_url="http://h/v1", api_kind=ApiKind.OPENAI_CHAT,
                                    model="m"), "p", "here")
        assert run is not None
        now = datetime.now(UTC)
        samples = [Sample(seq=i, stage=0, t_sched_ms=None, t_send_ms=float(i),
                          sent_at=now + timedelta(milliseconds=i), measurement=Measurement(
                              ttft_ms=1.0, itl_ms=(), e2e_ms=2.0, output_tokens=1,
                              tokens_server_counted=True, input_tokens=1, http_status=200,
                              error_class=None, trace_id=os.urandom(16).hex()))
                   for i in range(20)]
        assert export.spans.record(run, samples) == 0
        export.shutdown()
    assert collector.spans() == []


WITHOUT_SDK = """
import importlib.abc, logging, sys

class NoSdk(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoSdk())
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
from sustain.service.metrics import Metrics
from sustain.service.otlp.setup import start_export
Metrics("here")
print("export:", start_export("here"))
"""


def test_without_the_otel_extra_the_service_runs_and_says_why_nothing_is_exported() -> None:
    import subprocess
    import sys

    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    done = subprocess.run([sys.executable, "-c", WITHOUT_SDK], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "export: None" in done.stdout
    assert "ERROR" in done.stderr
    assert "sustain[otel]" in done.stderr
