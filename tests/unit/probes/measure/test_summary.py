from __future__ import annotations

import pytest

from sustain.probes.measure.sample import ErrorClass
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.measure.summary import (
    GeneratorHealth,
    combined_health,
    generator_health,
    summarise,
)
from tests.unit.probes.samples import sample


def test_tpot_excludes_the_first_token() -> None:
    s = sample(ttft=50.0, e2e=360.0, tokens=32)
    assert s.tpot_ms == pytest.approx(10.0)
    assert sample(tokens=1).tpot_ms is None


def test_corrected_latency_adds_the_generator_lag() -> None:
    s = sample(t_sched=100.0, t_send=130.0, e2e=360.0)
    assert s.lag_ms == pytest.approx(30.0)
    assert s.corrected_e2e_ms == pytest.approx(390.0)


def test_summary_counts_availability_throughput_and_errors() -> None:
    samples = [sample(i, t_sched=i * 100.0, t_send=i * 100.0) for i in range(8)]
    samples += [sample(8, error=ErrorClass.HTTP_5XX, ttft=None, tokens=0),
                sample(9, error=ErrorClass.TIMEOUT_TOTAL, ttft=None, tokens=0)]
    summary = summarise(samples, duration_s=2.0)
    assert summary.attempts == 10
    assert summary.successes == 8
    assert summary.availability == pytest.approx(0.8)
    assert summary.requests_per_second == pytest.approx(4.0)
    assert summary.output_tokens_per_second == pytest.approx(8 * 32 / 2.0)
    assert summary.errors == {"http_5xx": 1, "timeout_total": 1}
    assert summary.ttft_ms.count == 8
    assert summary.e2e_ms.count == 8


def test_empty_run_has_no_availability() -> None:
    summary = summarise([], duration_s=0.0)
    assert summary.availability is None
    assert summary.requests_per_second is None


def test_generator_lag_beyond_threshold_marks_run_saturated() -> None:
    on_time = [sample(i, t_sched=i * 100.0, t_send=i * 100.0 + 0.5) for i in range(100)]
    assert not generator_health(on_time).saturated
    late = [sample(i, t_sched=i * 100.0, t_send=i * 100.0 + 20.0) for i in range(100)]
    health = generator_health(late)
    assert health.saturated
    assert health.threshold_ms == pytest.approx(5.0)


def test_lag_threshold_scales_with_mean_inter_arrival_time() -> None:
    slow_rate = [sample(i, t_sched=i * 10_000.0, t_send=i * 10_000.0 + 80.0) for i in range(10)]
    health = generator_health(slow_rate)
    assert health.threshold_ms == pytest.approx(100.0)
    assert not health.saturated


def test_goodput_counts_successes_that_meet_every_threshold() -> None:
    samples = [sample(0, ttft=50.0, e2e=300.0), sample(1, ttft=250.0, e2e=600.0),
               sample(2, ttft=80.0, e2e=900.0),
               sample(3, error=ErrorClass.HTTP_5XX, ttft=None, tokens=0)]
    summary = summarise(samples, 2.0, SloThresholds(ttft_ms=100.0, e2e_ms=800.0))
    assert summary.goodput == pytest.approx(0.5)
    assert summarise(samples, 2.0, SloThresholds()).goodput is None
    assert summarise(samples, 2.0).goodput is None


def test_a_run_is_saturated_when_any_stage_was() -> None:
    calm = GeneratorHealth(lag_p99_ms=1.0, threshold_ms=5.0, saturated=False)
    busy = GeneratorHealth(lag_p99_ms=40.0, threshold_ms=5.0, saturated=True)
    closed = GeneratorHealth(lag_p99_ms=None, threshold_ms=None, saturated=False)
    combined = combined_health([calm, busy, closed])
    assert combined.saturated
    assert combined.lag_p99_ms == 40.0
    assert not combined_health([calm, closed]).saturated
