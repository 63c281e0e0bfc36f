"""The GenAI histograms as the OpenTelemetry data model defines explicit-bucket histograms:
bucket i holds the values in (bound[i-1], bound[i]], so a value on a bound counts in the
bucket below it; count, sum, min and max of every value; at most MAX_SERIES attribute sets
per histogram, the rest in one overflow series; cumulative totals, or with DELTA temporality
only what came since the last export. Which requests feed which histogram: every request's
duration, a failed one's under its `error.type`; tokens, first chunks and chunk gaps of
successful ones, the chunks of streamed ones only."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.metrics.export import AggregationTemporality, HistogramDataPoint
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.service.otlp import metrics as otlp_metrics
from sustain.service.otlp.attributes import RunAttributes
from sustain.service.otlp.metrics import (
    DURATION,
    LATENCY_BUCKETS_S,
    TIME_PER_OUTPUT_CHUNK,
    TIME_TO_FIRST_CHUNK,
    TOKEN_USAGE,
    GenAiMetrics,
    Instrument,
)

RUN = RunAttributes(operation="chat", provider="openai", model="m", address="h", port=443,
                    probe="p", location="here")


def sample(e2e_ms: float, *, ttft_ms: float | None = None, itl_ms: tuple[float, ...] = (),
           streamed: bool | None = True, error: ErrorClass | None = None, output: int = 3,
           input_tokens: int | None = 5) -> Sample:
    return Sample(seq=0, stage=0, t_sched_ms=None, t_send_ms=0.0, sent_at=datetime.now(UTC),
                  measurement=Measurement(
                      ttft_ms=ttft_ms, itl_ms=itl_ms, e2e_ms=e2e_ms, output_tokens=output,
                      tokens_server_counted=True, input_tokens=input_tokens,
                      http_status=500 if error else 200, error_class=error,
                      streamed=streamed))


def collected(metrics: GenAiMetrics) -> dict[str, list[HistogramDataPoint]]:
    data = metrics.collect()
    if data is None:
        return {}
    (resource_metrics,) = data.resource_metrics
    (scope_metrics,) = resource_metrics.scope_metrics
    return {metric.name: [p for p in metric.data.data_points
                          if isinstance(p, HistogramDataPoint)]
            for metric in scope_metrics.metrics}


def attributes(point: HistogramDataPoint) -> dict[str, object]:
    return dict(point.attributes or {})


def fresh(temporality: AggregationTemporality = AggregationTemporality.CUMULATIVE
          ) -> GenAiMetrics:
    return GenAiMetrics(Resource({"service.name": "t"}), InstrumentationScope("t"), temporality)


def only(found: dict[str, list[HistogramDataPoint]], instrument: Instrument
         ) -> HistogramDataPoint:
    (point,) = found[instrument.name]
    return point


def test_a_value_on_a_bound_counts_in_the_bucket_below_it() -> None:
    metrics = fresh()
    # 10 ms is the first bound; 10.001 ms is above it; 81.92 s the last; 100 s beyond it
    metrics.record(RUN, [sample(10.0), sample(10.001), sample(81_920.0), sample(100_000.0)])
    point = only(collected(metrics), DURATION)
    counts = list(point.bucket_counts)
    assert len(counts) == len(LATENCY_BUCKETS_S) + 1
    assert counts[0] == 1
    assert counts[1] == 1
    assert counts[-2] == 1
    assert counts[-1] == 1
    assert point.count == 4
    assert point.sum == pytest.approx(10.0e-3 + 10.001e-3 + 81.92 + 100.0)
    assert point.min == pytest.approx(0.01)
    assert point.max == pytest.approx(100.0)


def test_each_request_feeds_the_histograms_its_outcome_and_streaming_allow() -> None:
    metrics = fresh()
    metrics.record(RUN, [
        sample(100.0, ttft_ms=20.0, itl_ms=(5.0, 6.0, 7.0)),
        sample(80.0, ttft_ms=80.0, streamed=False, input_tokens=None),  # answered whole
        sample(30.0, error=ErrorClass.HTTP_5XX, output=0),
        sample(40.0, error=ErrorClass.TIMEOUT_TOTAL, output=0),
        sample(50.0, error=ErrorClass.HTTP_5XX, output=0),
    ])
    found = collected(metrics)
    by_error = {attributes(p).get("error.type"): p.count for p in found[DURATION.name]}
    assert by_error == {None: 2, "http_5xx": 2, "timeout_total": 1}
    tokens = {attributes(p)["gen_ai.token.type"]: (p.count, p.sum)
              for p in found[TOKEN_USAGE.name]}
    assert tokens == {"input": (1, 5), "output": (2, 6)}
    assert only(found, TIME_TO_FIRST_CHUNK).count == 1
    chunks = only(found, TIME_PER_OUTPUT_CHUNK)
    assert chunks.count == 3
    assert chunks.sum == pytest.approx(0.018)


def test_attribute_sets_past_the_limit_share_one_overflow_series(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otlp_metrics, "MAX_SERIES", 3)
    metrics = fresh()
    for name in "abcde":
        metrics.record(RunAttributes("chat", "openai", "m", None, None, name, "here"),
                       [sample(10.0)])
    points = collected(metrics)[DURATION.name]
    assert len(points) == 4
    overflow = [p for p in points if attributes(p).get("otel.metric.overflow") is True]
    assert len(overflow) == 1
    assert overflow[0].count == 2
    assert {attributes(p).get("sustain.probe") for p in points} == {"a", "b", "c", None}


def test_cumulative_exports_keep_totals_and_delta_exports_start_over() -> None:
    cumulative, delta = fresh(), fresh(AggregationTemporality.DELTA)
    for metrics in (cumulative, delta):
        metrics.record(RUN, [sample(10.0), sample(20.0)])
    first_cumulative, first_delta = collected(cumulative), collected(delta)
    for metrics in (cumulative, delta):
        metrics.record(RUN, [sample(30.0)])
    second_cumulative, second_delta = collected(cumulative), collected(delta)
    assert only(first_cumulative, DURATION).count == 2
    assert only(second_cumulative, DURATION).count == 3
    assert only(second_cumulative, DURATION).start_time_unix_nano == \
        only(first_cumulative, DURATION).start_time_unix_nano
    assert only(first_delta, DURATION).count == 2
    assert only(second_delta, DURATION).count == 1
    assert only(second_delta, DURATION).start_time_unix_nano == \
        only(first_delta, DURATION).time_unix_nano
    assert collected(delta) == {}
