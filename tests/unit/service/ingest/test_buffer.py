"""The write buffer: FIFO per run, bounded, admission stops before samples are dropped."""

from __future__ import annotations

from datetime import UTC, datetime

from sustain.probes.measure.sample import Measurement, Sample
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.rows import POS, RUN_ID, SAMPLE_COLUMNS

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def sample(seq: int) -> Sample:
    return Sample(seq=seq, stage=0, t_sched_ms=None, t_send_ms=float(seq), sent_at=NOW,
                  measurement=Measurement(ttft_ms=5.0, itl_ms=(1.0, 3.0), e2e_ms=9.0,
                                          output_tokens=3, tokens_server_counted=True,
                                          input_tokens=4, http_status=200, error_class=None))


def test_rows_are_numbered_in_buffer_order_and_the_final_follows_them() -> None:
    buffer = SampleBuffer(capacity=1000)
    sink = buffer.open(7, 3)
    for seq in (2, 0, 1):
        sink.put(sample(seq))
    sink.finish(RunFinal(run_id=7, probe_id=3, scheduled_for=NOW, status="succeeded"))
    items = buffer.peek(10)
    rows = [i for i in items if isinstance(i, tuple)]
    assert [(r[RUN_ID], r[POS], r[SAMPLE_COLUMNS.index("seq")]) for r in rows] == \
        [(7, 0, 2), (7, 1, 0), (7, 2, 1)]
    assert rows[0][SAMPLE_COLUMNS.index("itl_mean_ms")] == 2.0
    assert isinstance(items[-1], RunFinal)
    assert buffer.samples == 3
    buffer.pop(len(items))
    assert (buffer.samples, len(buffer)) == (0, 0)


def test_a_run_stays_unwritten_until_its_final_record_is_durable() -> None:
    buffer = SampleBuffer(capacity=1000)
    sink = buffer.open(7, 3)
    sink.put(sample(0))
    sink.finish(RunFinal(run_id=7, probe_id=3, scheduled_for=NOW, status="succeeded"))
    assert buffer.unwritten_finals == {7}
    batch = buffer.peek(10)
    assert buffer.unwritten_finals == {7}, "being written is not yet written"
    buffer.pop(len(batch))
    assert buffer.unwritten_finals == set()


def test_peek_takes_at_most_the_batch_of_rows_with_finals_riding_along() -> None:
    buffer = SampleBuffer(capacity=1000)
    first, second = buffer.open(1, 1), buffer.open(2, 1)
    first.put(sample(0))
    first.finish(RunFinal(run_id=1, probe_id=1, scheduled_for=NOW, status="succeeded"))
    second.put(sample(0))
    second.put(sample(1))
    batch = buffer.peek(2)
    assert len(batch) == 3
    assert isinstance(batch[1], RunFinal)


def test_a_full_buffer_stops_new_runs_first_and_then_counts_what_it_drops() -> None:
    buffer = SampleBuffer(capacity=1000)
    sink = buffer.open(1, 1)
    for seq in range(899):
        sink.put(sample(seq))
    assert buffer.accepting
    sink.put(sample(899))
    assert not buffer.accepting
    for seq in range(900, 1010):
        sink.put(sample(seq))
    assert (buffer.samples, buffer.dropped_total, sink.dropped) == (1000, 10, 10)
    sink.finish(RunFinal(run_id=1, probe_id=1, scheduled_for=NOW, status="succeeded"))
    final = buffer.peek(2000)[-1]
    assert isinstance(final, RunFinal)
    assert final.samples_dropped == 10
