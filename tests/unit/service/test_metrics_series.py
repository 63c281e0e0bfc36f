"""What /metrics costs Prometheus: the latency buckets' layout (fine over 5 ms..60 s, the
round SLO thresholds among the bounds), the series one probe adds per location (what
docs/prometheus.md states), no `*_created` series, and bulk counting that exposes what
client_python's own Histogram would."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.probes.measure.summary import summarise
from sustain.service.db.runs import LastRun
from sustain.service.metrics import Metrics
from sustain.service.probe_metrics import (
    FINE_FROM_S,
    FINE_TO_S,
    LATENCY_BUCKETS_S,
    LATENCY_FAMILIES,
    SERIES_PER_HISTOGRAM,
    LatencyHistograms,
    ProbeMetrics,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "prometheus.md"
START = datetime(2026, 5, 1, tzinfo=UTC)


def documented(phrase: str) -> int:
    """The bold figure docs/prometheus.md gives right before `phrase`."""
    match = re.search(r"\*\*(\d[\d,]*)\*\* " + re.escape(phrase), DOC.read_text())
    assert match, f"docs/prometheus.md states **N** {phrase}"
    return int(match.group(1).replace(",", ""))


def chat_request(seq: int, error: ErrorClass | None = None) -> Sample:
    """A streamed chat request of a model that answers at once (TTFO is TTFT), each on a new
    connection."""
    measurement = Measurement(
        ttft_ms=60.0 + seq, itl_ms=(10.0,) * 31, e2e_ms=370.0 + seq, output_tokens=32,
        tokens_server_counted=True, input_tokens=100, http_status=200, error_class=None,
        ttfo_ms=60.0 + seq, connect_ms=0.2, ttfb_ms=55.0 + seq,
        connection_reused=False) if error is None else Measurement(
        ttft_ms=None, itl_ms=(), e2e_ms=5.0, output_tokens=0, tokens_server_counted=False,
        input_tokens=None, http_status=500, error_class=error)
    return Sample(seq=seq, stage=0, t_sched_ms=seq * 100.0, t_send_ms=seq * 100.0,
                  sent_at=START + timedelta(milliseconds=seq * 100), measurement=measurement)


def probe_series(text: str, probe: str, location: str) -> dict[str, int]:
    """Series per family name on a /metrics text that carry this probe and location."""
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("probe") == probe and sample.labels.get("location") == location:
                counts[family.name] = counts.get(family.name, 0) + 1
    return counts


def test_buckets_are_at_most_10_percent_wide_from_5_ms_to_60_s() -> None:
    fine = [b for b in LATENCY_BUCKETS_S if b >= FINE_FROM_S]
    fine = fine[:next(i for i, b in enumerate(fine) if b >= FINE_TO_S) + 1]
    assert fine[0] == FINE_FROM_S
    assert fine[-1] >= FINE_TO_S
    assert max(high / low for low, high in pairwise(fine)) <= 1.10
    assert list(LATENCY_BUCKETS_S) == sorted(set(LATENCY_BUCKETS_S))
    # the thresholds SLOs are written in are bounds, so `le` counts them exactly
    for threshold in (0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 1.0, 2.0, 2.5, 3.0,
                      5.0, 10.0, 30.0):
        assert threshold in LATENCY_BUCKETS_S, threshold


def test_one_probes_series_per_location_are_what_the_docs_state() -> None:
    metrics = Metrics()
    metrics.observe_samples("sim", "chat", "sim-model", [chat_request(i) for i in range(50)])
    metrics.observe_run("chat", "succeeded")
    run = summarise([chat_request(i) for i in range(50)], duration_s=5.0)
    metrics.last_runs.snapshot = (LastRun(
        probe="chat", endpoint="sim", model="sim-model", location="default",
        status="succeeded", finished_at=START, summary=run.model_dump(mode="json")),)
    series = probe_series(metrics.exposition().decode(), "chat", "default")

    histograms = {f.name for f in LATENCY_FAMILIES}
    assert {name: series[name] for name in histograms} == \
        {name: SERIES_PER_HISTOGRAM for name in histograms}
    assert sum(series[name] for name in histograms) == \
        documented("latency histogram series per probe and location")
    assert documented("series per latency family") == SERIES_PER_HISTOGRAM
    last_run = sum(n for name, n in series.items() if name.startswith("sustain_probe_last_run"))
    assert last_run == documented("last-run gauges")
    assert sum(series.values()) == documented("series per location in all")

    # a failure adds its outcome and error class, once however often it happens
    metrics.observe_samples("sim", "chat", "sim-model",
                            [chat_request(i, ErrorClass.HTTP_5XX) for i in range(3)])
    again = probe_series(metrics.exposition().decode(), "chat", "default")
    assert sum(again.values()) == sum(series.values()) + 1


def test_no_created_series_on_the_services_or_an_agents_metrics() -> None:
    metrics = Metrics()
    metrics.observe_samples("sim", "chat", "sim-model", [chat_request(0)])
    metrics.observe_run("chat", "succeeded")
    agent = ProbeMetrics(CollectorRegistry(), "eu")
    agent.observe_samples("sim", "chat", "sim-model", [chat_request(0)])
    for text in (metrics.exposition().decode(), generate_latest(agent.registry).decode()):
        names = {sample.name for family in text_string_to_metric_families(text)
                 for sample in family.samples}
        assert "sustain_requests_total" in names
        assert "sustain_ttft_seconds_bucket" in names
        assert not [name for name in names if name.endswith("_created")]


def buckets_of(families: Iterable[Metric]) -> dict[str, float]:
    return {sample.labels["le"]: sample.value for family in families
            for sample in family.samples if sample.name.endswith("_bucket")}


def test_bulk_counting_exposes_what_client_pythons_histogram_would() -> None:
    """Values on a bound count in that bound's bucket (le is inclusive), below the first in
    the first, past the last in +Inf; non-finite values are left out. Milliseconds in,
    seconds counted."""
    on_bounds_ms = [1.0, 5.0, 100.0, 500.0, 1000.0, 2500.0, 60_000.0 * 10]
    values_ms = [0.0, 0.5, 1.0001, *on_bounds_ms, *(b * 1000.0 for b in LATENCY_BUCKETS_S),
                 73.3, 59_990.0, 601_000.0, 3_600_000.0]
    assert all(v / 1000.0 in LATENCY_BUCKETS_S for v in on_bounds_ms)
    reference = CollectorRegistry()
    histogram = Histogram("sustain_e2e_seconds", "x", buckets=LATENCY_BUCKETS_S,
                          registry=reference)
    for value in values_ms:
        histogram.observe(value / 1000.0)
    bulk = LatencyHistograms(families=[LATENCY_FAMILIES[1]])
    bulk.observe_ms("e2e", ("sim", "chat", "m", "default"), [*values_ms, math.nan, math.inf])

    got = buckets_of(bulk.collect())
    assert got == buckets_of(reference.collect())
    assert got["+Inf"] == len(values_ms)
    assert got["0.005"] - got["0.0025"] == 1 + 1, "5 ms itself and the 5 ms bound"
    (total,) = [s.value for f in bulk.collect() for s in f.samples if s.name.endswith("_sum")]
    assert total == pytest.approx(sum(values_ms) / 1000.0)
