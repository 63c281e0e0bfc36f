"""Test OTLP receivers on loopback ports, each on its own thread: what an OpenTelemetry
Collector's OTLP receiver accepts, decoded with opentelemetry-proto's generated classes.

- OtlpHttpReceiver: OTLP/HTTP with protobuf bodies at /v1/metrics and /v1/traces (gzip
  bodies too); it can answer a status it is told to (a collector refusing a key) or stall.
- OtlpGrpcReceiver: OTLP/gRPC, the MetricsService and TraceService servicers.

Both keep every request's headers and decoded body, and flatten them for assertions:
`histograms()` (name, unit, attributes, count, sum, bucket counts, bounds) and `spans()`
(trace id as 32 hex digits, name, kind, times, attributes, status).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Callable, MutableMapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
import uvicorn
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

Scope = MutableMapping[str, Any]
AttributeValue = str | int | float | bool


def value_of(value: AnyValue) -> AttributeValue:
    """An OTLP attribute value as the Python value it carries."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    raise AssertionError(f"unexpected attribute value {value}")


def attributes_of(pairs: Sequence[KeyValue]) -> dict[str, AttributeValue]:
    return {pair.key: value_of(pair.value) for pair in pairs}


@dataclass(frozen=True)
class HistogramPoint:
    """One histogram data point of one export, with its metric's name and unit."""

    name: str
    unit: str
    temporality: int
    resource: dict[str, AttributeValue]
    attributes: dict[str, AttributeValue]
    count: int
    sum: float
    bucket_counts: tuple[int, ...]
    bounds: tuple[float, ...]
    start_ns: int
    time_ns: int


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    """32 hex digits."""
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    status_code: int
    resource: dict[str, AttributeValue]


class _Store:
    """What a receiver got: the decoded requests and their headers, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.traces: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []

    def add_metrics(self, request: ExportMetricsServiceRequest, headers: dict[str, str]) -> None:
        with self._lock:
            self.metrics.append(request)
            self.headers.append(headers)

    def add_traces(self, request: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        with self._lock:
            self.traces.append(request)
            self.headers.append(headers)

    def histograms(self) -> list[HistogramPoint]:
        """Every histogram data point received, in arrival order."""
        with self._lock:
            requests = list(self.metrics)
        points = []
        for request in requests:
            for resource_metrics in request.resource_metrics:
                resource = attributes_of(resource_metrics.resource.attributes)
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        if metric.WhichOneof("data") != "histogram":
                            continue
                        for point in metric.histogram.data_points:
                            points.append(HistogramPoint(
                                metric.name, metric.unit,
                                metric.histogram.aggregation_temporality, resource,
                                attributes_of(point.attributes), point.count, point.sum,
                                tuple(point.bucket_counts), tuple(point.explicit_bounds),
                                point.start_time_unix_nano, point.time_unix_nano))
        return points

    def spans(self) -> list[ReceivedSpan]:
        """Every span received, in arrival order."""
        with self._lock:
            requests = list(self.traces)
        spans = []
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = attributes_of(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        spans.append(ReceivedSpan(
                            span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                            span.name, span.kind, span.start_time_unix_nano,
                            span.end_time_unix_nano, attributes_of(span.attributes),
                            span.status.code, resource))
        return spans

    def all_headers(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self.headers)

    def wait_for(self, check: Callable[[], bool], timeout_s: float) -> None:
        """Until `check()` holds; AssertionError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.05)
        raise AssertionError(f"OTLP receiver: not within {timeout_s}s; got "
                             f"{len(self.histograms())} histogram points, "
                             f"{len(self.spans())} spans")


class OtlpHttpReceiver(_Store):
    """OTLP/HTTP (protobuf) at /v1/metrics and /v1/traces on 127.0.0.1."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []
        """Statuses to answer, first to last (the request is still recorded); 200 after."""
        self.stall_s = 0.0
        """Seconds to wait before answering each request."""
        self._server = uvicorn.Server(uvicorn.Config(
            self._app, host="127.0.0.1", port=0, log_level="warning", access_log=False,
            lifespan="off", interface="asgi3", timeout_graceful_shutdown=1))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()),
                                        name="otlp-http-receiver", daemon=True)
        self.port = 0

    @property
    def endpoint(self) -> str:
        """OTEL_EXPORTER_OTLP_ENDPOINT for it (the exporters add /v1/<signal>)."""
        return f"http://127.0.0.1:{self.port}"

    async def _app(self, scope: Scope, receive: Callable[[], Any],
                   send: Callable[[dict[str, Any]], Any]) -> None:
        if scope["type"] != "http":
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = b"".join(parts)
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        answer: bytes = b""
        if scope["path"] == "/v1/metrics":
            self.add_metrics(ExportMetricsServiceRequest.FromString(body), headers)
            answer = ExportMetricsServiceResponse().SerializeToString()
        elif scope["path"] == "/v1/traces":
            self.add_traces(ExportTraceServiceRequest.FromString(body), headers)
            answer = ExportTraceServiceResponse().SerializeToString()
        status = self.statuses.pop(0) if self.statuses else (
            200 if scope["path"] in ("/v1/metrics", "/v1/traces") else 404)
        if self.stall_s:
            await asyncio.sleep(self.stall_s)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/x-protobuf")]})
        await send({"type": "http.response.body", "body": answer if status == 200 else b""})

    def __enter__(self) -> OtlpHttpReceiver:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("OTLP/HTTP receiver did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(5)


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, store: _Store) -> None:
        self.store = store

    def Export(self, request: ExportMetricsServiceRequest,
               context: grpc.ServicerContext) -> ExportMetricsServiceResponse:
        self.store.add_metrics(request, {k: str(v) for k, v in context.invocation_metadata()})
        return ExportMetricsServiceResponse()


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, store: _Store) -> None:
        self.store = store

    def Export(self, request: ExportTraceServiceRequest,
               context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        self.store.add_traces(request, {k: str(v) for k, v in context.invocation_metadata()})
        return ExportTraceServiceResponse()


class OtlpGrpcReceiver(_Store):
    """OTLP/gRPC (the MetricsService and TraceService) on 127.0.0.1, without TLS."""

    def __init__(self) -> None:
        super().__init__()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _Metrics(self), self._server)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _Traces(self), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        """OTEL_EXPORTER_OTLP_ENDPOINT for it (http: no TLS)."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpGrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.stop(grace=1).wait(5)
