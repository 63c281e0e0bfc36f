"""One measured request, as docs/metrics.md#reference-times defines it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from sustain.probes.measure.reply import Reply

NS_PER_MS = 1_000_000
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
