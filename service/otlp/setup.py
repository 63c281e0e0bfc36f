"""Whether and how OpenTelemetry export runs, from the standard OTEL_* variables, as every
OpenTelemetry SDK reads them (docs/opentelemetry.md lists those honoured):

- on only where an OTLP endpoint is set: OTEL_EXPORTER_OTLP_ENDPOINT for both signals, or
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT for one; a signal
  is off with OTEL_METRICS_EXPORTER / OTEL_TRACES_EXPORTER `none`, both with
  OTEL_SDK_DISABLED `true`;
- the protocol, OTEL_EXPORTER_OTLP_PROTOCOL (or the signal's own): `grpc`, the Python SDK's
  default, or `http/protobuf`;
- the endpoint, headers, timeout, compression and certificates are read by the SDK's
  exporters themselves; the resource by the SDK's Resource.create (OTEL_SERVICE_NAME,
  OTEL_RESOURCE_ATTRIBUTES; the service name is `sustain` where neither names one); the span
  queue and batches by its BatchSpanProcessor (OTEL_BSP_*);
- the metrics' export interval and timeout (OTEL_METRIC_EXPORT_INTERVAL,
  OTEL_METRIC_EXPORT_TIMEOUT, ms) and temporality
  (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE) as the SDK's metric reader reads them;
- the spans' sampler: OTEL_TRACES_SAMPLER as the SDK reads it where set; where not, a share
  of requests by trace id (traceidratio), OTEL_TRACES_SAMPLER_ARG or DEFAULT_SPAN_SHARE.

Nothing here logs an endpoint beyond its host and port, nor any header.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from sustain.probes.client.target import Target
from sustain.probes.measure.sample import Sample
from sustain.service.otlp.attributes import run_attributes, server_of

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace.export import SpanExporter

    from sustain.service.otlp.metrics import GenAiMetrics, MetricsPusher
    from sustain.service.otlp.spans import SpanRecorder

logger = logging.getLogger(__name__)

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
SIGNAL_ENDPOINT = {"metrics": "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                   "traces": "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}
PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
SIGNAL_PROTOCOL = {"metrics": "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
                   "traces": "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}
SIGNAL_EXPORTER = {"metrics": "OTEL_METRICS_EXPORTER", "traces": "OTEL_TRACES_EXPORTER"}
SDK_DISABLED = "OTEL_SDK_DISABLED"
EXPORT_INTERVAL = "OTEL_METRIC_EXPORT_INTERVAL"
EXPORT_TIMEOUT = "OTEL_METRIC_EXPORT_TIMEOUT"
TEMPORALITY = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
SAMPLER = "OTEL_TRACES_SAMPLER"
SAMPLER_ARG = "OTEL_TRACES_SAMPLER_ARG"
SPAN_QUEUE = "OTEL_BSP_MAX_QUEUE_SIZE"

PROTOCOLS = ("grpc", "http/protobuf")
DEFAULT_PROTOCOL = "grpc"
"""What the Python SDK's own configuration uses where no protocol is set."""
EXPORT_INTERVAL_MS = 60_000.0
EXPORT_TIMEOUT_MS = 30_000.0
"""The SDK's defaults for OTEL_METRIC_EXPORT_INTERVAL and OTEL_METRIC_EXPORT_TIMEOUT."""
SPAN_QUEUE_SIZE = 2048
"""The SDK's default for OTEL_BSP_MAX_QUEUE_SIZE: spans waiting to be sent."""
DEFAULT_SPAN_SHARE = 0.1
"""The share of requests that get a span where OTEL_TRACES_SAMPLER is not set and
OTEL_TRACES_SAMPLER_ARG names none: one in ten, decided by trace id."""
SHUTDOWN_TIMEOUT_S = 5.0
"""At stop, how long the last metrics and the queued spans may take to reach the collector;
then they are dropped and the stop goes on."""
SERVICE_NAME = "sustain"


class OtlpConfigError(ValueError):
    """An OTEL_* variable that export cannot run with (an unknown protocol)."""


def signal_on(signal: str) -> bool:
    """Whether `signal` (`metrics`, `traces`) is exported: an endpoint is set for it, and
    neither OTEL_SDK_DISABLED nor its OTEL_*_EXPORTER turns it off."""
    if os.environ.get(SDK_DISABLED, "").strip().lower() == "true":
        return False
    if os.environ.get(SIGNAL_EXPORTER[signal], "").strip().lower() == "none":
        return False
    return bool(os.environ.get(SIGNAL_ENDPOINT[signal], "").strip()
                or os.environ.get(ENDPOINT, "").strip())


def otlp_configured() -> bool:
    """Whether either signal is exported (an OTLP endpoint is set)."""
    return signal_on("metrics") or signal_on("traces")


def protocol_of(signal: str) -> str:
    """The OTLP protocol of `signal`: its own variable's, the common one's, or grpc."""
    value = (os.environ.get(SIGNAL_PROTOCOL[signal], "").strip()
             or os.environ.get(PROTOCOL, "").strip() or DEFAULT_PROTOCOL)
    if value not in PROTOCOLS:
        raise OtlpConfigError(f"{SIGNAL_PROTOCOL[signal]} / {PROTOCOL} is {value!r}: OTLP "
                              f"export takes {' or '.join(PROTOCOLS)}")
    return value


def where(signal: str) -> str:
    """Where `signal` goes, for a log line: its endpoint's host and port only (an endpoint
    may carry credentials)."""
    endpoint = (os.environ.get(SIGNAL_ENDPOINT[signal], "").strip()
                or os.environ.get(ENDPOINT, "").strip())
    host, port = server_of(endpoint if "//" in endpoint else f"//{endpoint}")
    return "an unparsable endpoint" if host is None else f"{host}:{port or ''}".rstrip(":")


def milliseconds(name: str, default: float) -> float:
    """A positive duration variable in ms, or `default` (with a warning) where it is not one."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        logger.warning("%s is %r, not a positive number of milliseconds: using %g", name, raw,
                       default)
        return default
    return value


def span_share() -> float:
    """OTEL_TRACES_SAMPLER_ARG as a share from 0 to 1, or DEFAULT_SPAN_SHARE."""
    raw = os.environ.get(SAMPLER_ARG, "").strip()
    if not raw:
        return DEFAULT_SPAN_SHARE
    try:
        share = float(raw)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        logger.warning("%s is %r, not a share from 0 to 1: using %g", SAMPLER_ARG, raw,
                       DEFAULT_SPAN_SHARE)
        return DEFAULT_SPAN_SHARE
    return share


def span_queue_size() -> int:
    """OTEL_BSP_MAX_QUEUE_SIZE as the SDK reads it (its default where unset or invalid)."""
    try:
        size = int(os.environ.get(SPAN_QUEUE, SPAN_QUEUE_SIZE))
    except ValueError:
        return SPAN_QUEUE_SIZE
    return size if size > 0 else SPAN_QUEUE_SIZE


def sustain_version() -> str | None:
    try:
        return version("sustain")
    except PackageNotFoundError:
        return None


class OtlpExport:
    """Export on: what records each finished run, and what sends it."""

    def __init__(self, location: str, metrics: GenAiMetrics | None,
                 pusher: MetricsPusher | None, spans: SpanRecorder | None) -> None:
        self.location = location
        """`sustain.location` of everything this process measures."""
        self.metrics = metrics
        self.pusher = pusher
        self.spans = spans

    def observe_samples(self, target: Target, probe: str, samples: Sequence[Sample]) -> None:
        """A finished run of `probe` against `target`: its requests into the histograms, and
        the spans of its sampled ones. Called after the run, never while it is timed; never
        raises (a failure here is logged, and the run is stored as ever)."""
        try:
            run = run_attributes(target, probe, self.location)
            if run is None or not samples:
                return
            if self.metrics is not None:
                self.metrics.record(run, samples)
            if self.spans is not None:
                self.spans.record(run, samples)
        except Exception:
            logger.exception("OpenTelemetry export: recording a run of probe %s failed", probe)

    def shutdown(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """The last metrics and the queued spans to the collector, then the exporters shut;
        at most about `timeout_s` (blocking: call it from a thread)."""
        closing = threading.Thread(target=self._close, args=(timeout_s,), daemon=True,
                                   name="sustain-otlp-shutdown")
        closing.start()
        closing.join(timeout_s)
        if closing.is_alive():
            logger.warning("OpenTelemetry export: the collector did not take the last metrics "
                           "and spans within %gs; they are dropped", timeout_s)

    def _close(self, timeout_s: float) -> None:
        if self.pusher is not None:
            self.pusher.shutdown(timeout_s)
        if self.spans is not None:
            self.spans.provider.shutdown()


def start_export(location: str) -> OtlpExport | None:
    """Start exporting, where an OTLP endpoint is set (None where not): the exporters, the
    metrics' thread and the span processor's. Raises OtlpConfigError for a protocol it does
    not know; logs an error and returns None where the `otel` extra is not installed."""
    metrics_on, traces_on = signal_on("metrics"), signal_on("traces")
    if not (metrics_on or traces_on):
        return None
    protocols = {signal: protocol_of(signal) for signal, on in
                 (("metrics", metrics_on), ("traces", traces_on)) if on}
    try:
        return _start(location, protocols)
    except ImportError as exc:
        logger.error("OpenTelemetry export is configured (%s) but the OpenTelemetry SDK is not "
                     "installed (%s): install sustain[otel]; nothing is exported", ENDPOINT,
                     exc.name)
        return None


def _start(location: str, protocols: dict[str, str]) -> OtlpExport:
    from opentelemetry.sdk.metrics.export import AggregationTemporality
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from sustain.service.otlp.metrics import GenAiMetrics, MetricsPusher
    from sustain.service.otlp.spans import SampleIds, SpanRecorder

    release = sustain_version()
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    if release is not None and "service.version" not in resource.attributes:
        resource = resource.merge(Resource({"service.version": release}))
    metrics = pusher = spans = None
    described = []
    if "metrics" in protocols:
        delta = os.environ.get(TEMPORALITY, "").strip().lower() in ("delta", "lowmemory")
        metrics = GenAiMetrics(resource, InstrumentationScope("sustain", release),
                               AggregationTemporality.DELTA if delta
                               else AggregationTemporality.CUMULATIVE)
        interval_ms = milliseconds(EXPORT_INTERVAL, EXPORT_INTERVAL_MS)
        pusher = MetricsPusher(metrics, _metric_exporter(protocols["metrics"]),
                               interval_ms / 1000, milliseconds(EXPORT_TIMEOUT,
                                                                EXPORT_TIMEOUT_MS) / 1000)
        pusher.start()
        described.append(f"metrics every {interval_ms / 1000:g}s to {where('metrics')} over "
                         f"{protocols['metrics']}")
    if "traces" in protocols:
        ids = SampleIds()
        by_env = bool(os.environ.get(SAMPLER, "").strip())
        share = span_share()
        provider = TracerProvider(
            resource=resource, id_generator=ids, shutdown_on_exit=False,
            sampler=None if by_env else TraceIdRatioBased(share))
        provider.add_span_processor(BatchSpanProcessor(_span_exporter(protocols["traces"])))
        spans = SpanRecorder(provider, ids, span_queue_size(), release)
        share_text = f"the {SAMPLER} sampler" if by_env else f"a share of {share:g}"
        described.append(f"spans of requests ({share_text}) to {where('traces')} over "
                         f"{protocols['traces']}")
    logger.info("OpenTelemetry export on (location %s): %s", location, "; ".join(described))
    return OtlpExport(location, metrics, pusher, spans)


def _metric_exporter(protocol: str) -> MetricExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        return OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )
    return HttpMetricExporter()


def _span_exporter(protocol: str) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )
    return HttpSpanExporter()
