"""Judging a level against a capacity SLO, and the Pareto front (probes/measure/capacity.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from sustain.probes.measure.capacity import CurvePoint, pareto_front, verdict
from sustain.probes.measure.capacity_slo import CapacitySlo
from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.probes.measure.summary import RunSummary, summarise


def summary_of(ttfts: list[float], failures: int = 0) -> RunSummary:
    samples = [Sample(seq=i, stage=0, t_sched_ms=None, t_send_ms=float(i),
                      sent_at=datetime(2026, 12, 4, tzinfo=UTC), measurement=Measurement(
                          ttft_ms=t, itl_ms=(5.0,), e2e_ms=t + 5, output_tokens=2,
                          tokens_server_counted=True, input_tokens=1, http_status=200,
                          error_class=None))
               for i, t in enumerate(ttfts)]
    samples += [Sample(seq=1000 + i, stage=0, t_sched_ms=None, t_send_ms=0.0,
                       sent_at=datetime(2026, 12, 4, tzinfo=UTC), measurement=Measurement(
                           ttft_ms=None, itl_ms=(), e2e_ms=1.0, output_tokens=0,
                           tokens_server_counted=True, input_tokens=None, http_status=500,
                           error_class=ErrorClass.HTTP_5XX)) for i in range(failures)]
    return summarise(samples, 1.0)


def test_a_level_passes_when_the_percentile_and_success_hold() -> None:
    slo = CapacitySlo(ttft_ms=50, percentile=90, min_success=0.9)
    ok = verdict(summary_of([10.0] * 95 + [80.0] * 5), slo)
    assert ok.passed
    assert ok.reason.startswith("TTFT p90")
    assert not ok.low_count  # 100 samples: enough for p90's bound (64), not for p99's (662)
    assert verdict(summary_of([10.0] * 100), CapacitySlo(ttft_ms=50)).low_count


def test_a_level_fails_naming_every_broken_condition() -> None:
    slo = CapacitySlo(ttft_ms=50, e2e_ms=1000, min_success=0.99)
    bad = verdict(summary_of([10.0] * 90 + [80.0] * 10, failures=5), slo)
    assert not bad.passed
    assert "TTFT p99" in bad.reason
    assert "success" in bad.reason
    assert "E2E" not in bad.reason


def test_the_front_keeps_points_no_other_beats_on_both_axes() -> None:
    def point(level: int, tps: float, per_user: float) -> CurvePoint:
        return CurvePoint(level=level, count=1, availability=1.0, system_tps=tps,
                          tps_per_user=per_user, ttft_p90_ms=None, ttft_p99_ms=None,
                          tpot_p90_ms=None, e2e_p99_ms=None, goodput=None)
    front = pareto_front([point(1, 100, 200), point(2, 190, 190), point(4, 180, 150),
                          point(8, 300, 90)])
    assert [p.on_front for p in front] == [True, True, False, True]
