"""Spans of a sampled share of a finished run's requests, each in the trace its request's
`traceparent` started (Measurement.trace_id), so that a collector joins it to the server's
spans of the same request.

A span is made after the run from its sample: it starts at the request's send time
(`sent_at`) and lasts its E2E, with the GenAI conventions' span name (`{operation} {model}`),
kind CLIENT and attributes, the request's token usage, and `error.type` with status ERROR for
a failed one. The sampler decides by trace id (TraceIdRatioBased, as a server that samples by
ratio does), so which requests have spans is the same wherever the decision is taken again.

The spans are the SDK's: a TracerProvider (never the global one) whose id generator hands the
sample's trace id to the span about to start (SampleIds), and a BatchSpanProcessor whose
bounded queue (OTEL_BSP_MAX_QUEUE_SIZE) and background thread send them over OTLP. A run
makes at most a queue's worth of spans, so one large run cannot overflow it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
from opentelemetry.trace import SpanKind, Status, StatusCode

from sustain.probes.measure.sample import Sample
from sustain.service.otlp.attributes import RunAttributes

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NS_PER_MS = 1_000_000
NS_PER_US = 1_000
SPAN_ID_MASK = (1 << 64) - 1
"""The low 64 bits of a trace id: the parent id its traceparent carried."""


class SampleIds(IdGenerator):
    """Ids for the spans made from samples: the trace id `use` set for the next span (then
    forgotten), else a random one; that span's id is the parent id its request's
    `traceparent` carried (the trace id's low 64 bits: probes/client/trace_context.py), so the
    server's span of the request is this span's child; other span ids random. Per thread, so
    spans made on two threads at once never take each other's ids."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._next = threading.local()

    def use(self, trace_id: int | None) -> None:
        """The trace id of the next span this thread starts (None: a random one)."""
        self._next.trace_id = trace_id

    def generate_trace_id(self) -> int:
        trace_id: int | None = getattr(self._next, "trace_id", None)
        self._next.trace_id = None
        self._next.span_id = trace_id & SPAN_ID_MASK if trace_id else None
        return trace_id if trace_id else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        span_id: int | None = getattr(self._next, "span_id", None)
        self._next.span_id = None
        return span_id if span_id else self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        """The probe's trace ids are 16 random bytes (probes/client/trace_context.py)."""
        return True


def trace_id_number(trace_id: str | None) -> int | None:
    """A stored trace id (32 hex digits) as the SDK's number; None when absent or invalid
    (then the span has a random trace id of its own)."""
    if trace_id is None or len(trace_id) != 32:
        return None
    try:
        number = int(trace_id, 16)
    except ValueError:
        return None
    return number or None


def unix_ns(moment: datetime) -> int:
    """`moment` (UTC where it names no zone) in ns since the Unix epoch, exact to the us."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(microseconds=1) * NS_PER_US


class SpanRecorder:
    """Makes the spans of the sampled requests of each finished run."""

    def __init__(self, provider: TracerProvider, ids: SampleIds, max_spans_per_run: int,
                 version: str | None = None) -> None:
        self.provider = provider
        self.ids = ids
        self.max_spans_per_run = max_spans_per_run
        """At most this many spans of one run (the span queue's size): the rest of its
        sampled requests have none."""
        self.tracer = provider.get_tracer("sustain", version)
        sampler = provider.sampler
        self._ratio_bound = sampler.bound if isinstance(sampler, TraceIdRatioBased) else None
        """The ratio sampler's bound, to pass over a request it would not sample without
        starting a span for it (most requests, at a share of 0.1); None for a sampler from
        OTEL_TRACES_SAMPLER, which decides as each span starts."""
        self._random = RandomIdGenerator()
        self.spans = 0
        """Spans made since the start."""

    def record(self, run: RunAttributes, samples: Sequence[Sample]) -> int:
        """The spans of a finished run's sampled requests; how many were made."""
        name = f"{run.operation} {run.model}"
        common = dict(run.pairs())
        bound = self._ratio_bound
        made = 0
        for sample in samples:
            if made >= self.max_spans_per_run:
                break
            m = sample.measurement
            trace_id = trace_id_number(m.trace_id) or self._random.generate_trace_id()
            if bound is not None and trace_id & TraceIdRatioBased.TRACE_ID_LIMIT >= bound:
                continue
            attributes: dict[str, str | int | float] = {**common, "sustain.seq": sample.seq}
            if m.http_status is not None:
                attributes["http.response.status_code"] = m.http_status
            if m.error_class is not None:
                attributes["error.type"] = m.error_class.value
            else:
                if m.input_tokens is not None:
                    attributes["gen_ai.usage.input_tokens"] = m.input_tokens
                if m.output_tokens > 0:
                    attributes["gen_ai.usage.output_tokens"] = m.output_tokens
                if m.streamed and m.ttft_ms is not None:
                    attributes["gen_ai.response.time_to_first_chunk"] = m.ttft_ms / 1000.0
            start_ns = unix_ns(sample.sent_at)
            self.ids.use(trace_id)
            span = self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes,
                                          start_time=start_ns)
            if not span.is_recording():
                continue
            if m.error_class is not None:
                span.set_status(Status(StatusCode.ERROR, m.error_class.value))
            span.end(end_time=start_ns + round(m.e2e_ms * NS_PER_MS))
            made += 1
        self.ids.use(None)
        self.spans += made
        return made
