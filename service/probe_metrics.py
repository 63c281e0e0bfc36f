"""What a measuring process counts as its runs finish (a replica's or an agent's): requests
by outcome, tokens, items and canaries, latency histograms, finished runs and skipped ticks,
each labelled with the endpoint, probe, model and location. Prometheus sums them over
processes. Kept apart from the service's other metrics, which read the database."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from sustain.probes.measure.sample import Outcome, Sample
from sustain.service.ticks.locations import DEFAULT_LOCATION

LATENCY_BUCKETS_S = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75,
    1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0,
)
"""TTFT and E2E buckets, seconds."""

TOKEN_LATENCY_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
    0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0,
)
"""ITL and TPOT buckets, seconds."""

SERIES_LABELS = ("endpoint", "probe", "model", "location")
"""Every probe series: its endpoint, probe and model, and where it was measured from (the
replica's location for request counters and histograms, the run's for last-run gauges)."""



class ProbeMetrics:
    def __init__(self, registry: CollectorRegistry, location: str = DEFAULT_LOCATION) -> None:
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
        self.ttft = Histogram(
            "sustain_ttft_seconds", "Time to first token of successful requests.",
            labels, buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.e2e = Histogram(
            "sustain_e2e_seconds", "End-to-end latency of successful requests.",
            labels, buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.itl = Histogram(
            "sustain_itl_seconds", "Inter-token latency of successful requests.",
            labels, buckets=TOKEN_LATENCY_BUCKETS_S, registry=self.registry)
        self.tpot = Histogram(
            "sustain_tpot_seconds", "Time per output token of successful requests.",
            labels, buckets=TOKEN_LATENCY_BUCKETS_S, registry=self.registry)
        self.ttfo = Histogram(
            "sustain_ttfo_seconds", "Time to the first answer output of successful requests "
            "(after a reasoning model's thinking; TTFT counts the thinking's first token).",
            labels, buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.ticks_skipped = Counter(
            "sustain_ticks_skipped", "Scheduled ticks that started no run, by reason.",
            ["probe", "reason"], registry=self.registry)

    def observe_samples(self, endpoint: str, probe: str, model: str,
                        samples: Sequence[Sample]) -> None:
        series = (endpoint, probe, model, self.location)
        for sample in samples:
            m = sample.measurement
            self.requests.labels(*series, str(sample.outcome),
                                 "none" if m.error_class is None else str(m.error_class)).inc()
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
            self.e2e.labels(*series).observe(m.e2e_ms / 1000.0)
            if m.ttft_ms is not None:
                self.ttft.labels(*series).observe(m.ttft_ms / 1000.0)
            if (tpot := sample.tpot_ms) is not None:
                self.tpot.labels(*series).observe(tpot / 1000.0)
            if m.ttfo_ms is not None:
                self.ttfo.labels(*series).observe(m.ttfo_ms / 1000.0)
            itl = self.itl.labels(*series)
            for gap in m.itl_ms:
                itl.observe(gap / 1000.0)

    def observe_run(self, probe: str, status: str, location: str | None = None) -> None:
        """A run finished here (in this replica's location), or (`location`) one elsewhere
        was cancelled through this replica."""
        self.runs.labels(probe, status, location or self.location).inc()

