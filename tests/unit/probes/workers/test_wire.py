"""A sample crosses the pipe unchanged."""

from __future__ import annotations

from datetime import UTC, datetime

from sustain.probes.load.clock import RunClock
from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.probes.workers import wire


def test_a_sample_survives_the_pipe_bit_for_bit() -> None:
    clock = RunClock(123_456_789, datetime(2026, 12, 3, 12, 0, tzinfo=UTC))
    samples = [
        Sample(seq=7, stage=1, t_sched_ms=10.25, t_send_ms=10.5, sent_at=clock.wall(10.5),
               measurement=Measurement(ttft_ms=50.123456789, itl_ms=(1.5, 0.1 + 0.2),
                                       e2e_ms=70.0, output_tokens=3, tokens_server_counted=True,
                                       input_tokens=12, http_status=200, error_class=None,
                                       cached_tokens=4, tool_call_ms=49.5, quality=False,
                                       prompt_tokens_requested=330, streamed=False,
                                       ttfo_ms=60.25, reasoning_tokens=2,
                                       reasoning_server_counted=True, input_chars=41,
                                       phases_ms=(("queue", 1.5), ("generation", 20.0),
                                                  ("content", 3.25))),
               conversation="agent-7", turn=2, session_end=True),
        Sample(seq=8, stage=0, t_sched_ms=None, t_send_ms=1e-9, sent_at=clock.wall(1e-9),
               measurement=Measurement(ttft_ms=None, itl_ms=(), e2e_ms=5000.0,
                                       output_tokens=0, tokens_server_counted=False,
                                       input_tokens=None, http_status=None,
                                       error_class=ErrorClass.TIMEOUT_FIRST_TOKEN,
                                       error_detail="no first token within 5 s")),
    ]
    decoder = wire.unpacker()
    packed = wire.pack({"op": "samples", "run": 1, "rows": [wire.sample_row(s) for s in samples]})
    for at in range(0, len(packed), 7):  # as a pipe may deliver it: in pieces
        decoder.feed(packed[at:at + 7])
    (message,) = list(decoder)
    assert [wire.row_sample(row, clock) for row in message["rows"]] == samples


def test_a_row_of_the_release_before_streamed_still_decodes() -> None:
    clock = RunClock(0, datetime(2026, 12, 3, 12, 0, tzinfo=UTC))
    sample = Sample(seq=1, stage=0, t_sched_ms=None, t_send_ms=1.0, sent_at=clock.wall(1.0),
                    measurement=Measurement(ttft_ms=2.0, itl_ms=(), e2e_ms=3.0,
                                            output_tokens=1, tokens_server_counted=True,
                                            input_tokens=None, http_status=200,
                                            error_class=None, streamed=True))
    row = list(wire.sample_row(sample))
    assert len(row) == wire.ROW_FIELDS
    old = wire.row_sample(row[:wire.OLD_ROW_FIELDS], clock)
    assert old.measurement.streamed is None
    assert old.measurement.e2e_ms == 3.0
    assert wire.row_sample(row, clock).measurement.streamed is True


def test_a_row_of_the_release_before_reasoning_still_decodes() -> None:
    clock = RunClock(0, datetime(2026, 12, 3, 12, 0, tzinfo=UTC))
    sample = Sample(seq=1, stage=0, t_sched_ms=None, t_send_ms=1.0, sent_at=clock.wall(1.0),
                    measurement=Measurement(ttft_ms=2.0, itl_ms=(), e2e_ms=3.0,
                                            output_tokens=1, tokens_server_counted=True,
                                            input_tokens=None, http_status=200,
                                            error_class=None, streamed=True, ttfo_ms=2.5,
                                            reasoning_tokens=1))
    row = list(wire.sample_row(sample))
    old = wire.row_sample(row[:wire.OLD_ROW_FIELDS + 1], clock)  # with `streamed`
    assert old.measurement.streamed is True
    assert (old.measurement.ttfo_ms, old.measurement.reasoning_tokens) == (None, None)
