"""Builders of Sample values for tests."""

from __future__ import annotations

from datetime import UTC, datetime

from sustain.probes.measure.sample import ErrorClass, Measurement, Sample


def sample(seq: int = 0, *, ttft: float | None = 50.0, e2e: float = 360.0, tokens: int = 32,
           error: ErrorClass | None = None, t_sched: float | None = 0.0,
           t_send: float = 0.0, itl: tuple[float, ...] = (10.0,)) -> Sample:
    return Sample(
        seq=seq, stage=0, t_sched_ms=t_sched, t_send_ms=t_send,
        sent_at=datetime(2026, 1, 1, tzinfo=UTC),
        measurement=Measurement(
            ttft_ms=ttft, itl_ms=itl, e2e_ms=e2e, output_tokens=tokens,
            tokens_server_counted=True, input_tokens=8, http_status=200, error_class=error,
        ),
    )
