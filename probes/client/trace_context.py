"""W3C trace context on every probe request (https://www.w3.org/TR/trace-context/): a
`traceparent` header of version 00, a fresh random 16-byte trace id and 8-byte parent (span)
id, and flags 01 (sampled: the probe keeps every request's trace id with its sample, so a
server that samples by its parent's decision keeps its trace too). No tracing SDK: the header
is 55 characters made from os.urandom, when the request is encoded, before its send time is
read (streaming.encode_request), so it costs nothing on the timed path.

The trace id is stored with the sample (Measurement.trace_id), so the server's trace of any
measured request can be looked up from the run. The parent (span) id is the trace id's last 16
hex digits (`span_id_of`): stored with it for free, so a span exported later for the request
(service/otlp/spans.py) has the very id the server's span names as its parent. An
asynchronous job's requests (create, polls, content) carry their sample's header: one trace
per sample.

`untraced()` turns the header and the phase timings (phases.py) off, for
benchmarks/cpu_cost.py alone, which weighs what they cost against requests without them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

HEADER = "traceparent"
VERSION = "00"
SAMPLED = "01"
TRACE_ID_HEX = 32
"""Hex digits of a trace id (16 bytes)."""
_ZERO_TRACE = "0" * TRACE_ID_HEX
_ZERO_SPAN = "0" * 16


class _Switch:
    """Whether requests carry a traceparent and are timed by phase (on, but in a benchmark's
    comparison)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


_SWITCH = _Switch()


def tracing() -> bool:
    """Whether requests carry a traceparent and their phases are timed (always, but inside
    `untraced`)."""
    return _SWITCH.on


@contextmanager
def untraced() -> Iterator[None]:
    """Requests without a traceparent and without phase timings, for as long as the block
    lasts: for benchmarks/cpu_cost.py's side-by-side comparison only."""
    _SWITCH.on = False
    try:
        yield
    finally:
        _SWITCH.on = True


def traceparent() -> str:
    """A fresh `traceparent` value: `00-<32 hex trace id>-<16 hex span id>-01`, the span id
    the trace id's last 16 digits (`span_id_of`). An all-zero id is invalid (the spec's), so
    one is drawn again (a chance of 2^-64 at most)."""
    while True:
        trace = os.urandom(16).hex()
        span = span_id_of(trace)
        if span != _ZERO_SPAN:
            return f"{VERSION}-{trace}-{span}-{SAMPLED}"


def span_id_of(trace_id: str) -> str:
    """The parent (span) id the probe sent with `trace_id`: its last 16 hex digits."""
    return trace_id[TRACE_ID_HEX - 16:]


def traced(headers: dict[str, str]) -> dict[str, str]:
    """`headers` (a request's own dict, changed in place and returned) with a fresh
    traceparent, replacing any given (every request starts its own trace); unchanged inside
    `untraced`."""
    if _SWITCH.on:
        headers[HEADER] = traceparent()
    return headers


def trace_id_of(headers: Mapping[str, str]) -> str | None:
    """The trace id of the traceparent among a request's `headers` (as `traced` wrote it),
    or None without one."""
    value = headers.get(HEADER)
    return None if value is None else value[3:3 + TRACE_ID_HEX]


def is_trace_id(value: object) -> bool:
    """Whether `value` is a valid trace id: 32 lower-case hex digits, not all zero."""
    return isinstance(value, str) and len(value) == TRACE_ID_HEX and value != _ZERO_TRACE \
        and all(c in "0123456789abcdef" for c in value)
