"""A sample as a `samples` row: a flat tuple in SAMPLE_COLUMNS order, small enough to buffer
a million of (ITL gaps are reduced to count, mean and max)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sustain.probes.measure.sample import Sample

SAMPLE_COLUMNS: tuple[str, ...] = (
    "run_id", "pos", "probe_id", "seq", "stage", "sent_at", "t_sched_ms", "t_send_ms",
    "lag_ms", "ttft_ms", "itl_count", "itl_mean_ms", "itl_max_ms", "tpot_ms", "e2e_ms",
    "corrected_e2e_ms", "input_tokens", "output_tokens", "tokens_server_counted", "outcome",
    "error_class", "http_status", "cached_tokens", "conversation", "turn", "tool_call_ms",
    "quality",
)
SAMPLE_TYPES: tuple[str, ...] = (
    "bigint", "integer", "bigint", "integer", "smallint", "timestamptz", "float8", "float8",
    "float8", "float8", "integer", "float8", "float8", "float8", "float8", "float8", "integer",
    "integer", "boolean", "text", "text", "smallint", "integer", "text", "integer", "float8",
    "boolean",
)
"""Postgres types of SAMPLE_COLUMNS, for the array parameters of the batch insert."""

RUN_ID, POS, PROBE_ID, SENT_AT = 0, 1, 2, 5

SampleTuple = tuple[Any, ...]


def sample_tuple(run_id: int, pos: int, probe_id: int, sample: Sample) -> SampleTuple:
    m = sample.measurement
    itl = m.itl_ms
    return (
        run_id, pos, probe_id, sample.seq, sample.stage, sample.sent_at, sample.t_sched_ms,
        sample.t_send_ms, sample.lag_ms, m.ttft_ms, len(itl),
        sum(itl) / len(itl) if itl else None, max(itl) if itl else None, sample.tpot_ms,
        m.e2e_ms, sample.corrected_e2e_ms, m.input_tokens, m.output_tokens,
        m.tokens_server_counted, str(sample.outcome),
        None if m.error_class is None else str(m.error_class), m.http_status,
        m.cached_tokens, sample.conversation, sample.turn, m.tool_call_ms, sample.quality,
    )


def sent_at(row: SampleTuple) -> datetime:
    value: datetime = row[SENT_AT]
    return value
