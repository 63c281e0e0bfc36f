"""What a measuring process counts as its runs finish (a replica's or an agent's): requests
by outcome, tokens, items and canaries, latency histograms, finished runs and skipped ticks,
each labelled with the endpoint, probe, model and location. Prometheus sums them over
processes. Kept apart from the service's other metrics, which read the database.

The latency histograms count exactly the values sustain sketches for its own percentiles
(run_sketches.metric_values), in buckets fine enough that `histogram_quantile` lands within a
few per cent of those percentiles (docs/prometheus.md#latency-histograms)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, disable_created_metrics
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from sustain.probes.measure.run_sketches import MetricName, metric_values
from sustain.probes.measure.sample import Outcome, Sample
from sustain.service.ticks.locations import DEFAULT_LOCATION

BUCKET_MANTISSAS = (
    1.0, 1.09, 1.19, 1.3, 1.41, 1.54, 1.68, 1.83,
    2.0, 2.15, 2.32, 2.5, 2.74, 3.0, 3.27, 3.56, 3.87, 4.22, 4.59,
    5.0, 5.45, 5.95, 6.48, 7.07, 7.71, 8.41, 9.17,
)
"""One decade of latency bucket bounds (times 10^k): 27 bounds, each at most 9.6 % above the
one before (geometric between the round ones, 3 significant digits), and the round ones SLO
thresholds are written in (1, 2, 2.5, 3, 5) among them, so `le="0.5"` counts the requests
within 500 ms exactly."""
FINE_FROM_S = 0.005
FINE_TO_S = 60.0
"""The range where the buckets are that fine (at most 10 % wide), seconds."""
COARSE_BELOW_S = (0.001, 0.0025)
COARSE_ABOVE_S = (120.0, 300.0, 600.0)
"""A few wide buckets outside the fine range, seconds: sub-5 ms token gaps, and E2E of
long generations and media jobs up to 10 minutes (beyond: +Inf)."""


def _fine_bounds() -> tuple[float, ...]:
    """Every decade's mantissas from FINE_FROM_S up to the first bound at or past FINE_TO_S;
    written through a decimal string so that `le` reads `0.0545`, never `0.054500000000001`."""
    decades = range(math.floor(math.log10(FINE_FROM_S)), math.ceil(math.log10(FINE_TO_S)) + 1)
    bounds = [bound for exponent in decades for mantissa in BUCKET_MANTISSAS
              if (bound := float(f"{mantissa}e{exponent}")) >= FINE_FROM_S]
    last = next(i for i, bound in enumerate(bounds) if bound >= FINE_TO_S)
    return tuple(bounds[:last + 1])


LATENCY_BUCKETS_S = (*COARSE_BELOW_S, *_fine_bounds(), *COARSE_ABOVE_S)
"""Upper bounds of every latency histogram's buckets, seconds (+Inf follows)."""

SERIES_LABELS = ("endpoint", "probe", "model", "location")
"""Every probe series: its endpoint, probe and model, and where it was measured from (the
replica's location for request counters and histograms, the run's for last-run gauges)."""


@dataclass(frozen=True)
class LatencyFamily:
    """One latency histogram, `sustain_<metric>_seconds`: the values sustain sketches as
    `metric` (ms) for its own percentiles, in seconds. A new family is one more entry in
    LATENCY_FAMILIES, once run_sketches yields its metric."""

    metric: MetricName
    help: str

    @property
    def name(self) -> str:
        return f"sustain_{self.metric}_seconds"


LATENCY_FAMILIES = (
    LatencyFamily("ttft", "Time to first token of successful requests."),
    LatencyFamily("e2e", "End-to-end latency of successful requests."),
    LatencyFamily("itl", "Inter-token latency of successful requests."),
    LatencyFamily("tpot", "Time per output token of successful requests."),
    LatencyFamily("ttfo", "Time to the first answer output of successful requests (after a "
                          "reasoning model's thinking; TTFT counts the thinking's first token)."),
    LatencyFamily("ttfb", "Time from a successful request's send to its response head (the "
                          "server's time to answer, plus one round trip)."),
    LatencyFamily("connect", "TCP connect time of successful requests that opened a new "
                             "connection (the network's round trip to the server)."),
)
"""Every latency histogram, in exposition order."""

SERIES_PER_HISTOGRAM = len(LATENCY_BUCKETS_S) + 3
"""Series of one histogram family per probe and location: a bucket per bound, +Inf, _sum and
_count."""


class LatencyHistograms(Collector):
    """The latency histograms, counted in bulk: a run's values are binned at once (a sorted
    search over the bounds, where client_python's Histogram walks them one value at a time
    under a lock; a run's 256,000 token gaps took 0.04 s so, 1.4 s through its Histogram
    with these bounds). Exposed as ordinary cumulative histograms, as that Histogram would
    expose them; a series appears with its first value."""

    def __init__(self, families: Sequence[LatencyFamily] = LATENCY_FAMILIES,
                 bounds_s: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self.families = tuple(families)
        self._bounds = np.asarray(bounds_s, dtype=np.float64)
        # `le` written as client_python's own Histogram writes it
        self._le = [*(floatToGoString(b) for b in bounds_s),  # type: ignore[no-untyped-call]
                    "+Inf"]
        self._counts: dict[MetricName, dict[tuple[str, ...], npt.NDArray[np.int64]]] = {
            family.metric: {} for family in self.families}
        self._sums: dict[MetricName, dict[tuple[str, ...], float]] = {
            family.metric: {} for family in self.families}
        self._lock = threading.Lock()

    def observe_ms(self, metric: MetricName, series: tuple[str, ...],
                   values_ms: Sequence[float]) -> None:
        """Count `values_ms` (milliseconds, as sustain measures them) into `metric`'s
        histogram of `series` (SERIES_LABELS' values); non-finite values are left out."""
        seconds = np.asarray(values_ms, dtype=np.float64) / 1000.0
        seconds = seconds[np.isfinite(seconds)]
        if seconds.size == 0:
            return
        # le is inclusive: a value equal to a bound is in that bound's bucket.
        binned = np.bincount(np.searchsorted(self._bounds, seconds, side="left"),
                             minlength=len(self._le)).astype(np.int64)
        total = float(seconds.sum())
        with self._lock:
            counts = self._counts[metric]
            if series in counts:
                counts[series] += binned
                self._sums[metric][series] += total
            else:
                counts[series] = binned
                self._sums[metric][series] = total

    def describe(self) -> Iterable[Metric]:
        return self._families(fill=False)

    def collect(self) -> Iterable[Metric]:
        return self._families(fill=True)

    def _families(self, fill: bool) -> list[Metric]:
        families: list[Metric] = []
        with self._lock:
            for family in self.families:
                histogram = HistogramMetricFamily(family.name, family.help,
                                                  labels=list(SERIES_LABELS))
                sums = self._sums[family.metric]
                for series, counts in self._counts[family.metric].items() if fill else ():
                    cumulative = np.cumsum(counts)
                    histogram.add_metric(
                        list(series), [(le, float(c)) for le, c in zip(self._le, cumulative,
                                                                     strict=True)],
                        sums[series])
                families.append(histogram)
        return families


class ProbeMetrics:
    def __init__(self, registry: CollectorRegistry, location: str = DEFAULT_LOCATION) -> None:
        # Every sustain registry (a replica's, an agent's) is built around this: no series
        # `*_created` (client_python's creation time of every counter and histogram child,
        # process-wide), which would double the counters' series for nothing any query reads.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry
        self.location = location
        """This process's location: the `location` label of what it measures."""
        labels = SERIES_LABELS
        self.requests = Counter(
            "sustain_requests", "Probe requests by outcome and error class.",
            [*labels, "outcome", "error_class"], registry=self.registry)
        self.output_tokens = Counter(
            "sustain_output_tokens", "Output tokens of successful probe requests.",
            labels, registry=self.registry)
        self.prompt_tokens = Counter(
            "sustain_prompt_tokens", "Prompt tokens of successful probe requests, as the "
            "server counted them.", labels, registry=self.registry)
        self.cached_tokens = Counter(
            "sustain_cached_tokens", "Prompt tokens of successful probe requests that the "
            "server served from its prefix cache (where it reports them): divided by "
            "sustain_prompt_tokens_total, the cache hit ratio.", labels,
            registry=self.registry)
        self.reasoning_tokens = Counter(
            "sustain_reasoning_tokens", "Output tokens that successful probe requests spent "
            "reasoning (part of sustain_output_tokens_total: divided by it, the reasoning "
            "share).", labels, registry=self.registry)
        self.items = Counter(
            "sustain_items", "Inputs embedded (openai-embeddings) or documents ranked "
            "(rerank) by successful probe requests: its rate is inputs/s or documents/s.",
            labels, registry=self.registry)
        self.quality_checks = Counter(
            "sustain_quality_checks", "Quality canaries checked (successful requests whose "
            "dataset line has an `expect`), by result: passed or failed.",
            [*labels, "result"], registry=self.registry)
        self.runs = Counter(
            "sustain_runs", "Finished runs by status.", ["probe", "status", "location"],
            registry=self.registry)
        self.latency = LatencyHistograms()
        self.registry.register(self.latency)
        self.ticks_skipped = Counter(
            "sustain_ticks_skipped", "Scheduled ticks that started no run, by reason.",
            ["probe", "reason"], registry=self.registry)

    def observe_samples(self, endpoint: str, probe: str, model: str,
                        samples: Sequence[Sample]) -> None:
        series = (endpoint, probe, model, self.location)
        latencies: dict[str, list[float]] = {f.metric: [] for f in self.latency.families}
        for sample in samples:
            m = sample.measurement
            self.requests.labels(*series, str(sample.outcome),
                                 "none" if m.error_class is None else str(m.error_class)).inc()
            for metric, value in metric_values(sample):
                if (values := latencies.get(metric)) is not None:
                    values.append(value)
            if sample.outcome is not Outcome.SUCCESS:
                continue
            self.output_tokens.labels(*series).inc(m.output_tokens)
            if m.reasoning_tokens:
                self.reasoning_tokens.labels(*series).inc(m.reasoning_tokens)
            if m.items is not None:
                self.items.labels(*series).inc(m.items)
            if m.quality is not None:
                self.quality_checks.labels(*series, "passed" if m.quality else "failed").inc()
            if m.input_tokens is not None:
                self.prompt_tokens.labels(*series).inc(m.input_tokens)
                if m.cached_tokens is not None:
                    self.cached_tokens.labels(*series).inc(m.cached_tokens)
        for family in self.latency.families:
            self.latency.observe_ms(family.metric, series, latencies[family.metric])

    def observe_run(self, probe: str, status: str, location: str | None = None) -> None:
        """A run finished here (in this replica's location), or (`location`) one elsewhere
        was cancelled through this replica."""
        self.runs.labels(probe, status, location or self.location).inc()
