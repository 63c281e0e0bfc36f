"""Steady state (probes/measure/steady.py): windows of completed requests, their TPOT p90,
CoV and drift as MLPerf Endpoints judges them."""

from __future__ import annotations

from datetime import UTC, datetime

from sustain.probes.measure.sample import Measurement, Sample
from sustain.probes.measure.steady import steady_state


def stream(tpots: list[float]) -> list[Sample]:
    """Requests one after another, 100 ms apart, with these TPOTs (10 tokens each)."""
    out = []
    for seq, tpot in enumerate(tpots):
        out.append(Sample(seq=seq, stage=0, t_sched_ms=None, t_send_ms=seq * 100.0,
                          sent_at=datetime(2026, 12, 4, tzinfo=UTC), measurement=Measurement(
                              ttft_ms=10.0, itl_ms=(tpot,) * 9, e2e_ms=10.0 + 9 * tpot,
                              output_tokens=10, tokens_server_counted=True, input_tokens=1,
                              http_status=200, error_class=None)))
    return out


def test_a_flat_stage_is_steady_throughout() -> None:
    judged = steady_state(stream([5.0 + 0.01 * (i % 3) for i in range(80)]))
    assert judged.state.steady
    assert (judged.state.windows, judged.state.steady_windows) == (10, 10)
    assert judged.start_ms is None
    assert judged.state.cov_tpot_p90 is not None
    assert judged.state.cov_tpot_p90 < 0.05


def test_a_warming_stage_is_steady_from_where_it_settled_and_keeps_that_part() -> None:
    samples = stream([20.0 - i * 0.5 for i in range(24)] + [8.0] * 56)
    judged = steady_state(samples)
    assert judged.state.steady
    assert judged.state.steady_windows < judged.state.windows
    assert judged.start_ms is not None
    assert all(s.tpot_ms == 8.0 for s in judged.samples)
    assert "steady from window" in judged.state.reason


def test_a_stage_that_keeps_climbing_never_settles_and_too_few_requests_are_named() -> None:
    climbing = steady_state(stream([5.0 + i * 0.5 for i in range(80)]))
    assert not climbing.state.steady
    assert climbing.state.reason.startswith("never settled")
    assert len(climbing.samples) == 80
    few = steady_state(stream([5.0] * 20))
    assert not few.state.steady
    assert "fewer than 4 windows" in few.state.reason
