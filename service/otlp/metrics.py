"""The GenAI client metrics of finished runs (OpenTelemetry's GenAI semantic conventions),
aggregated here and pushed over OTLP by the SDK's exporter from a thread of their own.

Four histograms, each with the conventions' name, unit and bucket boundaries:

- `gen_ai.client.operation.duration` (s): every request's end-to-end time, a failed one's
  with `error.type` (its error class: `timeout_total`, `http_5xx`, ...);
- `gen_ai.client.token.usage` (`{token}`): a successful request's input tokens (as the server
  counted them) and output tokens, told apart by `gen_ai.token.type` (`input`, `output`);
- `gen_ai.client.operation.time_to_first_chunk` (s): a streamed request's time to its first
  output-bearing event (TTFT);
- `gen_ai.client.operation.time_per_output_chunk` (s): every gap between two output-bearing
  events of a streamed request (ITL), one value per chunk after the first.

Why not the SDK's instruments: a `Histogram.record` costs about 12 us of CPU (its attributes
are cleaned and hashed on every call), and a run records one value per chunk of every
request: 35 calls for a 32-token answer would cost half of what measuring the request does.
Here a run's values are grouped by attribute set in one pass over its samples and counted
into buckets with numpy (a few microseconds per request), and the SDK's OTLP exporter sends
the resulting data points, built from the SDK's own data classes (benchmarks/otlp_cost.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricExporter,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from sustain.probes.measure.sample import Sample
from sustain.service.otlp.attributes import Attributes, RunAttributes

logger = logging.getLogger(__name__)

LATENCY_BUCKETS_S = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                     20.48, 40.96, 81.92)
"""The conventions' advice for every GenAI client duration histogram, seconds."""
TOKEN_BUCKETS = (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
                 1048576.0, 4194304.0, 16777216.0, 67108864.0)
"""The conventions' advice for gen_ai.client.token.usage, tokens."""
MAX_SERIES = 2000
"""Attribute sets one histogram keeps (the SDK's default cardinality limit): values of any
further set go to one series marked `otel.metric.overflow`."""
OVERFLOW: Attributes = (("otel.metric.overflow", True),)


@dataclass(frozen=True)
class Instrument:
    """One histogram of the conventions."""

    name: str
    unit: str
    description: str
    bounds: tuple[float, ...]
    """Explicit bucket boundaries: bucket i holds values in (bounds[i-1], bounds[i]]."""


DURATION = Instrument("gen_ai.client.operation.duration", "s", "GenAI operation duration.",
                      LATENCY_BUCKETS_S)
TOKEN_USAGE = Instrument("gen_ai.client.token.usage", "{token}",
                         "Number of input and output tokens used.", TOKEN_BUCKETS)
TIME_TO_FIRST_CHUNK = Instrument(
    "gen_ai.client.operation.time_to_first_chunk", "s",
    "Time to receive the first chunk, measured from when the client issues the generation "
    "request to when the first chunk is received in the response stream.",
    LATENCY_BUCKETS_S)
TIME_PER_OUTPUT_CHUNK = Instrument(
    "gen_ai.client.operation.time_per_output_chunk", "s",
    "Time per output chunk, recorded for each chunk received after the first one, measured "
    "as the time elapsed from the end of the previous chunk to the end of the current chunk.",
    LATENCY_BUCKETS_S)
INSTRUMENTS = (DURATION, TOKEN_USAGE, TIME_TO_FIRST_CHUNK, TIME_PER_OUTPUT_CHUNK)


class _Series:
    """One attribute set's histogram: bucket counts, count, sum, min and max."""

    __slots__ = ("count", "counts", "high", "low", "start_ns", "total")

    def __init__(self, buckets: int, start_ns: int) -> None:
        self.counts = np.zeros(buckets, dtype=np.int64)
        self.count = 0
        self.total = 0.0
        self.low = float("inf")
        self.high = float("-inf")
        self.start_ns = start_ns

    def add(self, counts: npt.NDArray[np.int64], values: npt.NDArray[np.float64]) -> None:
        self.counts += counts
        self.count += int(values.size)
        self.total += float(values.sum())
        self.low = min(self.low, float(values.min()))
        self.high = max(self.high, float(values.max()))


class GenAiMetrics:
    """The four histograms of everything this process measured, by attribute set.
    `record` is called on the event loop after a run; `collect` from the exporting thread."""

    def __init__(self, resource: Resource, scope: InstrumentationScope,
                 temporality: AggregationTemporality = AggregationTemporality.CUMULATIVE,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.resource = resource
        self.scope = scope
        self.temporality = temporality
        """CUMULATIVE: each export has the totals since the start; DELTA: what came since
        the last export (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE)."""
        self.clock = clock
        self._bounds = {instrument: np.asarray(instrument.bounds, dtype=np.float64)
                        for instrument in INSTRUMENTS}
        self._series: dict[Instrument, dict[Attributes, _Series]] = {
            instrument: {} for instrument in INSTRUMENTS}
        self._lock = threading.Lock()
        self._last_ns = clock()
        self.recorded = 0
        """Values recorded since the start, all histograms together."""

    def record(self, run: RunAttributes, samples: Sequence[Sample]) -> None:
        """Every request of a finished run, into the histograms: one pass over the samples
        groups the values by attribute set, then each group is counted at once."""
        ok_ms: list[float] = []
        failed_ms: dict[str, list[float]] = {}
        first_chunk_ms: list[float] = []
        gaps_ms: list[float] = []
        input_tokens: list[int] = []
        output_tokens: list[int] = []
        for sample in samples:
            m = sample.measurement
            if m.error_class is not None:
                failed_ms.setdefault(m.error_class.value, []).append(m.e2e_ms)
                continue
            ok_ms.append(m.e2e_ms)
            if m.output_tokens > 0:
                output_tokens.append(m.output_tokens)
            if m.input_tokens is not None:
                input_tokens.append(m.input_tokens)
            if m.streamed and m.ttft_ms is not None:
                first_chunk_ms.append(m.ttft_ms)
                gaps_ms.extend(m.itl_ms)
        base = run.pairs()
        groups: list[tuple[Instrument, Attributes, Sequence[float], float]] = [
            (DURATION, base, ok_ms, 1e-3),
            *((DURATION, (*base, ("error.type", error)), values, 1e-3)
              for error, values in failed_ms.items()),
            (TOKEN_USAGE, (*base, ("gen_ai.token.type", "input")), input_tokens, 1.0),
            (TOKEN_USAGE, (*base, ("gen_ai.token.type", "output")), output_tokens, 1.0),
            (TIME_TO_FIRST_CHUNK, base, first_chunk_ms, 1e-3),
            (TIME_PER_OUTPUT_CHUNK, base, gaps_ms, 1e-3),
        ]
        counted = []
        for instrument, attributes, raw, scale in groups:
            if not raw:
                continue
            values = np.asarray(raw, dtype=np.float64) * scale
            bounds = self._bounds[instrument]
            buckets = np.searchsorted(bounds, values, side="left")
            counted.append((instrument, attributes, values,
                            np.bincount(buckets, minlength=bounds.size + 1)))
        now = self.clock()
        with self._lock:
            for instrument, attributes, values, counts in counted:
                series = self._series[instrument]
                found = series.get(attributes)
                if found is None:
                    key = attributes if len(series) < MAX_SERIES else OVERFLOW
                    found = series.get(key)
                    if found is None:
                        found = series[key] = _Series(len(instrument.bounds) + 1, now)
                found.add(counts, values)
                self.recorded += int(values.size)

    def collect(self) -> MetricsData | None:
        """The histograms' data points now, for one export; None when there is none. With
        DELTA temporality the histograms start over."""
        now = self.clock()
        delta = self.temporality is AggregationTemporality.DELTA
        metrics = []
        with self._lock:
            start = self._last_ns
            self._last_ns = now
            for instrument in INSTRUMENTS:
                series = self._series[instrument]
                points = [HistogramDataPoint(
                    attributes=dict(attributes), start_time_unix_nano=start if delta
                    else s.start_ns, time_unix_nano=now, count=s.count, sum=s.total,
                    bucket_counts=s.counts.tolist(), explicit_bounds=list(instrument.bounds),
                    min=s.low, max=s.high) for attributes, s in series.items()]
                if delta:
                    series.clear()
                if points:
                    metrics.append(Metric(
                        name=instrument.name, description=instrument.description,
                        unit=instrument.unit, data=Histogram(
                            data_points=points, aggregation_temporality=self.temporality)))
        if not metrics:
            return None
        return MetricsData(resource_metrics=[ResourceMetrics(
            resource=self.resource, schema_url="",
            scope_metrics=[ScopeMetrics(scope=self.scope, metrics=metrics, schema_url="")])])


class MetricsPusher:
    """Exports the histograms every `interval_s` from a daemon thread of its own (the SDK's
    PeriodicExportingMetricReader's schedule: OTEL_METRIC_EXPORT_INTERVAL), and once more at
    shutdown. An export waits at most `timeout_s` (OTEL_METRIC_EXPORT_TIMEOUT; the exporter's
    own retries stop at OTEL_EXPORTER_OTLP_TIMEOUT): a collector that is down delays only
    this thread."""

    def __init__(self, metrics: GenAiMetrics, exporter: MetricExporter, interval_s: float,
                 timeout_s: float) -> None:
        self.metrics = metrics
        self.exporter = exporter
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.exports = 0
        """Exports attempted (each carried data)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sustain-otlp-metrics",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.push()
        self.push()

    def push(self) -> None:
        """Export what the histograms hold now (nothing when they hold nothing)."""
        data = self.metrics.collect()
        if data is None:
            return
        self.exports += 1
        try:
            self.exporter.export(data, timeout_millis=self.timeout_s * 1000)
        except Exception:  # the exporter logs its own failures; anything else is logged here
            logger.exception("OpenTelemetry export: exporting metrics failed")

    def shutdown(self, timeout_s: float) -> None:
        """The last export, then the exporter's shutdown; at most about `timeout_s`."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self.exporter.shutdown(timeout_millis=max(deadline - time.monotonic(), 0.0) * 1000)
