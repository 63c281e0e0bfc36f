"""A sample as a `samples` row: a flat tuple in STORED_COLUMNS order, small enough to buffer
a million of (ITL gaps are reduced to count, mean and max)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from sustain.probes.measure.sample import Sample

SAMPLE_COLUMNS: tuple[str, ...] = (
    "run_id", "pos", "probe_id", "seq", "stage", "sent_at", "t_sched_ms", "t_send_ms",
    "lag_ms", "ttft_ms", "itl_count", "itl_mean_ms", "itl_max_ms", "tpot_ms", "e2e_ms",
    "corrected_e2e_ms", "input_tokens", "output_tokens", "tokens_server_counted", "outcome",
    "error_class", "http_status", "cached_tokens", "conversation", "turn", "tool_call_ms",
    "quality", "items", "audio_s", "streamed", "ttfo_ms", "reasoning_tokens",
    "reasoning_server_counted", "input_chars", "dns_ms", "connect_ms", "tls_ms", "ttfb_ms",
    "connection_reused", "trace_id",
)
SAMPLE_TYPES: tuple[str, ...] = (
    "bigint", "integer", "bigint", "integer", "smallint", "timestamptz", "float8", "float8",
    "float8", "float8", "integer", "float8", "float8", "float8", "float8", "float8", "integer",
    "integer", "boolean", "text", "text", "smallint", "integer", "text", "integer", "float8",
    "boolean", "integer", "float8", "boolean", "float8", "integer", "boolean", "integer",
    "float8", "float8", "float8", "float8", "boolean", "text",
)
"""Postgres types of SAMPLE_COLUMNS, for the array parameters of the batch insert."""
STORED_COLUMNS: tuple[str, ...] = (*SAMPLE_COLUMNS, "error_detail")
"""What a sample row stores: SAMPLE_COLUMNS (what the samples API and the exports give), then
a failed request's error detail, which only the run's page reads (its first failure)."""
STORED_TYPES: tuple[str, ...] = (*SAMPLE_TYPES, "text")
MAX_STORED_DETAIL_CHARS = 1024
"""Characters of an error detail stored: the client keeps a few hundred
(error_body.WORDS_CHARS); an agent's upload may carry more."""

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
        m.items, m.audio_s, m.streamed, m.ttfo_ms, m.reasoning_tokens,
        m.reasoning_server_counted if m.reasoning_tokens is not None else None, m.input_chars,
        m.dns_ms, m.connect_ms, m.tls_ms, m.ttfb_ms, m.connection_reused, m.trace_id,
        None if m.error_detail is None or m.error_class is None
        else m.error_detail[:MAX_STORED_DETAIL_CHARS],
    )


_INTEGER_RANGES = {"smallint": 2**15, "integer": 2**31, "bigint": 2**63}
"""Each integer column type's bound: values lie in [-bound, bound - 1]."""


def row_problem(row: SampleTuple) -> tuple[str, str] | None:
    """Why PostgreSQL (or its driver) would refuse this row, as (reason, message), or None:
    an integer outside its column's range (a server's broken usage report), text it cannot
    hold (NUL, lone surrogates), a NaN or infinity where a figure belongs, a value of the
    wrong type. Checked in Python, so the writer can set such rows aside without asking the
    database about each."""
    for name, kind, value in zip(STORED_COLUMNS, STORED_TYPES, row, strict=True):
        if value is None:
            continue
        if kind in _INTEGER_RANGES:
            bound = _INTEGER_RANGES[kind]
            if isinstance(value, bool) or not isinstance(value, int):
                return "invalid_value", f"{name}: {type(value).__name__} is not an integer"
            if not -bound <= value < bound:
                return "out_of_range", f"{name}: {value} is outside the {kind} column's range"
        elif kind == "float8":
            if isinstance(value, bool) or not isinstance(value, int | float):
                return "invalid_value", f"{name}: {type(value).__name__} is not a number"
            if not math.isfinite(value):
                return "non_finite", f"{name}: {value!r} is not a finite number"
        elif kind == "text":
            if not isinstance(value, str):
                return "invalid_value", f"{name}: {type(value).__name__} is not text"
            if "\x00" in value:
                return "invalid_text", f"{name}: text with a NUL character"
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "invalid_text", f"{name}: text that is not valid Unicode"
    return None


def sent_at(row: SampleTuple) -> datetime:
    value: datetime = row[SENT_AT]
    return value
