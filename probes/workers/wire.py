"""What crosses the pipe between a worker process and its parent.

Every message is a msgpack map with an `op`. From the worker only plain data comes back
(samples as rows of numbers and short strings), so a worker that talks to a hostile endpoint
can hand its parent nothing but values. What the parent sends down (the target, workload and
policies of a run) is pickled: the parent started the worker and is trusted by it.

Parent to worker: `config` (once), `open` (a run's target and workload), `stage` (one shard
of one stage, from a common start), `stop` (end the stage in progress), `close` (forget a run).
Worker to parent: `ready`, `opened` or `failed` (a run could not be prepared: its secret,
dataset or tokenizer), `samples` (a batch of measured requests), `stage_done` (with how many
requests it sent and why it stopped early, if it did).
"""

from __future__ import annotations

from typing import Any

import msgpack

from sustain.probes.load.clock import RunClock
from sustain.probes.measure.sample import ErrorClass, Measurement, Sample

Message = dict[str, Any]
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""No one message is larger (a batch of samples is far smaller); a parent refuses more."""

Row = tuple[Any, ...]


def pack(message: Message) -> bytes:
    return msgpack.packb(message, use_bin_type=True)


def unpacker() -> msgpack.Unpacker:
    """A streaming decoder: feed it bytes as they arrive, iterate the whole messages."""
    return msgpack.Unpacker(raw=False, max_buffer_size=MAX_MESSAGE_BYTES,
                            strict_map_key=False)


def sample_row(sample: Sample) -> Row:
    """A sample as plain values (its wall-clock time is re-derived from the run's clock)."""
    m = sample.measurement
    return (sample.seq, sample.stage, sample.t_sched_ms, sample.t_send_ms, m.ttft_ms,
            m.itl_ms, m.e2e_ms, m.output_tokens, m.tokens_server_counted, m.input_tokens,
            m.http_status, None if m.error_class is None else m.error_class.value,
            m.error_detail, m.cached_tokens, m.tool_call_ms, sample.conversation, sample.turn,
            sample.session_end, m.quality, m.items, m.audio_s, m.image_size,
            None if m.stages_ms is None else [list(stage) for stage in m.stages_ms], m.hit,
            m.prompt_tokens_requested, m.streamed, m.ttfo_ms, m.reasoning_tokens,
            m.reasoning_server_counted, m.input_chars,
            None if m.phases_ms is None else [list(phase) for phase in m.phases_ms],
            m.dns_ms, m.connect_ms, m.tls_ms, m.ttfb_ms, m.connection_reused, m.trace_id)


ROW_FIELDS = 37
"""The values of a row sample_row makes. New fields go at the end, so a row of an earlier
release (an agent's upload) is still read: OLD_ROW_FIELDS is the shortest row_sample takes."""
OLD_ROW_FIELDS = 25
"""The row of two releases ago, before `streamed` (each field after it reads as None)."""


def row_sample(row: list[Any], clock: RunClock) -> Sample:
    """The sample a worker measured, on the run's time line. ValueError/TypeError for a row
    that is not one (a worker can only send what sample_row makes); a row of an earlier
    release (OLD_ROW_FIELDS) lacks the fields added since, which read as None."""
    if not OLD_ROW_FIELDS <= len(row) <= ROW_FIELDS:
        raise ValueError(f"a sample row of {OLD_ROW_FIELDS} to {ROW_FIELDS} values")
    padded: list[Any] = [*row, *[None] * (ROW_FIELDS - len(row))]
    (seq, stage, t_sched, t_send, ttft, itl, e2e, tokens, counted, input_tokens, status,
     error, detail, cached, tool_call, conversation, turn, session_end, quality, items,
     audio, image_size, stages, hit, requested, streamed, ttfo, reasoning,
     reasoning_counted, input_chars, phases, dns, connect, tls, ttfb, reused,
     trace_id) = padded
    measurement = Measurement(
        ttft_ms=None if ttft is None else float(ttft), itl_ms=tuple(float(g) for g in itl),
        e2e_ms=float(e2e), output_tokens=int(tokens), tokens_server_counted=bool(counted),
        input_tokens=None if input_tokens is None else int(input_tokens),
        http_status=None if status is None else int(status),
        error_class=None if error is None else ErrorClass(error),
        error_detail=None if detail is None else str(detail),
        cached_tokens=None if cached is None else int(cached),
        tool_call_ms=None if tool_call is None else float(tool_call),
        quality=None if quality is None else bool(quality),
        items=None if items is None else int(items),
        audio_s=None if audio is None else float(audio),
        image_size=None if image_size is None else str(image_size),
        stages_ms=None if stages is None else tuple((str(name), float(ms))
                                                    for name, ms in stages),
        hit=None if hit is None else bool(hit),
        prompt_tokens_requested=None if requested is None else int(requested),
        streamed=None if streamed is None else bool(streamed),
        ttfo_ms=None if ttfo is None else float(ttfo),
        reasoning_tokens=None if reasoning is None else int(reasoning),
        reasoning_server_counted=bool(reasoning_counted),
        input_chars=None if input_chars is None else int(input_chars),
        phases_ms=None if phases is None else tuple((str(name), float(ms))
                                                    for name, ms in phases),
        dns_ms=None if dns is None else float(dns),
        connect_ms=None if connect is None else float(connect),
        tls_ms=None if tls is None else float(tls),
        ttfb_ms=None if ttfb is None else float(ttfb),
        connection_reused=None if reused is None else bool(reused),
        trace_id=None if trace_id is None else str(trace_id))
    t_send_ms = float(t_send)
    return Sample(seq=int(seq), stage=int(stage),
                  t_sched_ms=None if t_sched is None else float(t_sched), t_send_ms=t_send_ms,
                  sent_at=clock.wall(t_send_ms), measurement=measurement,
                  conversation=None if conversation is None else str(conversation),
                  turn=None if turn is None else int(turn), session_end=bool(session_end))
