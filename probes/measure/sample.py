"""One measured request, as docs/metrics.md#reference-times defines it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from sustain.probes.measure.reply import Reply

NS_PER_MS = 1_000_000
JOB_PHASES = ("queue", "generation", "content")
"""An asynchronous job's phases, in order (Measurement.phases_ms)."""
"""Clients read the monotonic clock in ns (time.perf_counter_ns); Measurement fields are ms."""


class ErrorClass(enum.StrEnum):
    """Why a request failed; bounded, so it is safe as a metric label."""

    CONNECT = "connect"
    DNS = "dns"
    TLS = "tls"
    TIMEOUT_CONNECT = "timeout_connect"
    TIMEOUT_FIRST_TOKEN = "timeout_first_token"
    TIMEOUT_TOTAL = "timeout_total"
    HTTP_429 = "http_429"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    PROTOCOL = "protocol"
    TRUNCATED = "truncated"
    EMPTY = "empty"
    JOB_FAILED = "job_failed"
    """An asynchronous job (a video generation) that its server reported `failed`."""
    EGRESS_DENIED = "egress_denied"
    """The egress policy refused the connection (SUSTAIN_ALLOWED_TARGETS /
    SUSTAIN_DENIED_TARGETS, link-local and metadata addresses): nothing was sent."""


class Outcome(enum.StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"


@dataclass(frozen=True, slots=True)
class Measurement:
    """What a protocol client observed for one request, timed from t_send (ms)."""

    ttft_ms: float | None
    """Time to the first output-bearing event, from t_send; None when there was none."""
    itl_ms: tuple[float, ...]
    """Gaps between successive output-bearing events."""
    e2e_ms: float
    """End of the response (or the failure) minus t_send."""
    output_tokens: int
    tokens_server_counted: bool
    """True when output_tokens came from the server's usage report, False when estimated."""
    input_tokens: int | None
    http_status: int | None
    error_class: ErrorClass | None
    error_detail: str | None = None
    """A short, secret-free description for logs; never used as a metric label."""
    cached_tokens: int | None = None
    """Prompt tokens the server served from its prefix cache, as it reported them
    (`usage.prompt_tokens_details.cached_tokens`); None when it did not say."""
    reply: Reply | None = None
    """What the endpoint answered, for a request that keeps it (a session's turn, a quality
    canary); None for every other request."""
    tool_call_ms: float | None = None
    """Time to the first tool-call delta, from t_send; None when the reply called no tool
    (or was not kept)."""
    quality: bool | None = None
    """A quality canary's verdict: whether the reply met its `expect`; None when the request
    had none or failed (a failed request counts against availability, not quality)."""
    items: int | None = None
    """Inputs embedded (openai-embeddings) or documents ranked (rerank) by a successful
    request; None for the generation kinds."""
    audio_s: float | None = None
    """Seconds of audio a transcription request sent; None for the other kinds."""
    image_size: str | None = None
    """`WIDTHxHEIGHT` of the images a request attached (workload `images`); None without."""
    prompt_tokens_requested: int | None = None
    """The prompt length, in tokens, the request asked for (a synthetic prompt's, a trace
    request's), to set against the server's count (`input_tokens`); None for prompts of
    given text (a fixed prompt, a dataset, a session's history) and the other kinds."""
    vectors: npt.NDArray[np.float32] | None = None
    """An embeddings answer's vectors, in input order, the rows of one float32 matrix (4
    bytes a value), kept only for a pipeline's next stage (a RAG probe's retrieval); None
    otherwise (and never stored)."""
    ranking: tuple[int, ...] | None = None
    """A rerank answer's document indices, best first, kept only for a pipeline's next stage;
    None otherwise (and never stored)."""
    stages_ms: tuple[tuple[str, float], ...] | None = None
    """A RAG request's stages and their times (ms): embed, retrieve, rerank, generate_ttft,
    generate; None for a single request."""
    hit: bool | None = None
    """A RAG request's retrieval verdict: whether the passage its question expects was among
    those given to the model; None when the question names none (or it failed first)."""
    streamed: bool | None = None
    """Whether a request asked to stream (`stream: true`) was answered as a stream: False
    when the server answered one JSON body instead (its TTFT is its E2E;
    docs/metrics.md#not-streamed); None for a request not asked to stream."""
    ttfo_ms: float | None = None
    """Time to the first *answer* output (content, output text, a tool call's arguments),
    from t_send: after a reasoning model's thinking, where `ttft_ms` is the first output of
    any kind (docs/metrics.md#reasoning); equal to TTFT for a model that does not think, None
    when no answer came or the request was not streamed."""
    reasoning_tokens: int | None = None
    """Output tokens spent thinking (reasoning deltas), part of `output_tokens`: as the
    server's usage reported them (`completion_tokens_details.reasoning_tokens`,
    `output_tokens_details.reasoning_tokens`) or counted from the reasoning deltas
    (`reasoning_server_counted` False); None when the answer had no reasoning at all."""
    reasoning_server_counted: bool = False
    """True when reasoning_tokens came from the server's usage report, False when counted
    from the deltas (one per delta, as output tokens are without usage)."""
    input_chars: int | None = None
    """Characters of text a speech request asked to be spoken; None for the other kinds."""
    phases_ms: tuple[tuple[str, float], ...] | None = None
    """An asynchronous job's phases and their times (ms; JOB_PHASES): `queue` (created to
    running), `generation` (running to completed), `content` (fetching its result); None for
    a request answered at once."""
    dns_ms: float | None = None
    """Name resolution of the host, for a request that opened its own connection
    (docs/metrics.md#http-phases); None on a reused connection, for an address literal (no
    lookup) and where no connection was opened."""
    connect_ms: float | None = None
    """The TCP handshake (about one network round trip) of a request that opened its own
    connection; None on a reused connection."""
    tls_ms: float | None = None
    """The TLS handshake of a request that opened its own https connection; None on a reused
    connection and over plain http."""
    ttfb_ms: float | None = None
    """From the request handed to the socket (its connection ready) to its response head
    received: one network round trip plus the server's time to answer; None when no head
    came."""
    connection_reused: bool | None = None
    """True when the request went on a connection an earlier request opened (then dns, connect
    and TLS are None), False when it opened its own; None when no connection was had."""
    trace_id: str | None = None
    """The W3C trace id (32 lower-case hex digits) of the `traceparent` header the request
    carried, to find the server's trace of it; None for a request sent without one."""

    @property
    def answer_tokens(self) -> int:
        """Output tokens of the answer: the output less its reasoning tokens."""
        return max(self.output_tokens - (self.reasoning_tokens or 0), 0)

    @property
    def reasoning_share(self) -> float | None:
        """Reasoning tokens over all output tokens, from 0 to 1, of a request that told its
        first answer output (a streamed generation) or its reasoning tokens; None
        otherwise."""
        if self.output_tokens < 1 or (self.reasoning_tokens is None and self.ttfo_ms is None):
            return None
        return min((self.reasoning_tokens or 0) / self.output_tokens, 1.0)

    @property
    def rtf(self) -> float | None:
        """Real-time factor of a successful transcription: its processing time (E2E) over the
        audio's length; below 1 is faster than real time."""
        if self.audio_s is None or self.audio_s <= 0 or self.error_class is not None:
            return None
        return self.e2e_ms / 1000.0 / self.audio_s


@dataclass(frozen=True, slots=True)
class Sample:
    """One request of a run: the client's measurement placed on the run's time line."""

    seq: int
    stage: int
    t_sched_ms: float | None
    """Intended send time from the run origin (open-loop profiles); None for closed loop."""
    t_send_ms: float
    """Actual send time from the run origin (monotonic clock)."""
    sent_at: datetime
    """Wall-clock time of t_send, for storage and time-window queries."""
    measurement: Measurement
    conversation: str | None = None
    """A session's conversation id (from its file, or `c<n>` for a synthetic one); None
    outside sessions."""
    turn: int | None = None
    """The turn's index within its conversation, from 0."""
    session_end: bool = False
    """This turn ended its conversation: its last turn, or one that failed (the rest of a
    conversation is not sent after a failed turn)."""

    @property
    def quality(self) -> bool | None:
        """Whether the reply met the request's `expect` (a quality canary); None unchecked."""
        return self.measurement.quality

    @property
    def lag_ms(self) -> float | None:
        """t_send - t_sched: how late the generator was."""
        return None if self.t_sched_ms is None else self.t_send_ms - self.t_sched_ms

    @property
    def outcome(self) -> Outcome:
        return Outcome.SUCCESS if self.measurement.error_class is None else Outcome.FAILURE

    @property
    def ttft_ms(self) -> float | None:
        return self.measurement.ttft_ms

    @property
    def e2e_ms(self) -> float:
        return self.measurement.e2e_ms

    @property
    def tpot_ms(self) -> float | None:
        """(E2E - TTFT) / (output_tokens - 1), defined for output_tokens >= 2."""
        m = self.measurement
        if m.ttft_ms is None or m.output_tokens < 2:
            return None
        return (m.e2e_ms - m.ttft_ms) / (m.output_tokens - 1)

    @property
    def answer_tpot_ms(self) -> float | None:
        """TPOT of the answer part: (E2E - TTFO) / (answer tokens - 1), defined for 2 or more
        answer tokens of a request that told its first answer output; the pace a reader of
        the answer sees, after the thinking (docs/metrics.md#reasoning)."""
        m = self.measurement
        answer = m.answer_tokens
        if m.ttfo_ms is None or answer < 2:
            return None
        return (m.e2e_ms - m.ttfo_ms) / (answer - 1)

    @property
    def corrected_e2e_ms(self) -> float | None:
        """End minus t_sched: includes generator lag, so it cannot hide coordinated omission."""
        lag = self.lag_ms
        return None if lag is None else self.measurement.e2e_ms + lag

    @property
    def rag_stages_ms(self) -> tuple[tuple[str, float], ...]:
        """A RAG request's stage times (ms) and `overhead`: its E2E less the stages the
        generation's E2E ends (embed, retrieve, rerank, generate; not generate_ttft, which
        generate contains): the pipeline's own work between stages. Empty for a single
        request."""
        timed = self.measurement.stages_ms
        if timed is None:
            return ()
        spent = sum(ms for name, ms in timed if name != "generate_ttft")
        return (*timed, ("overhead", self.measurement.e2e_ms - spent))
