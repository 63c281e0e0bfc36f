"""Run bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from sustain.probes.run_result import RunReport
from sustain.service.schemas.common import DbId

RunStatus = Literal["pending", "running", "succeeded", "failed", "abandoned", "invalid", "missed",
                    "skipped", "cancelled", "interrupted"]


class RunRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: DbId
    probe_id: DbId
    trigger: Literal["schedule", "manual", "partition"]
    status: RunStatus
    scheduled_for: datetime
    location: str
    """Where it was measured from (a scheduled tick runs once per location of its probe)."""
    claimed_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    summary: RunReport | None
    samples_dropped: int = 0
    """Raw samples not stored because the write buffer was full (the summary counts them)."""
    cancel_requested_at: datetime | None = None
    """When a cancel was asked for; the run is `cancelled` within moments."""


class RunList(BaseModel):
    items: list[RunRead]
    next_cursor: str | None = None
    """Pass as `cursor` for the next page; null on the last page."""


class SampleRead(BaseModel):
    """One request of a run (figures: docs/metrics.md#ttft, docs/metrics.md#corrected-latency);
    times in ms, t_sched/t_send from the run's origin, the others from t_send."""

    run_id: DbId
    pos: int
    """Order in which the service recorded the run's samples (the cursor follows it)."""
    probe_id: DbId
    seq: int
    """Request number in the run's load profile."""
    stage: int
    sent_at: datetime
    t_sched_ms: float | None
    t_send_ms: float
    lag_ms: float | None
    ttft_ms: float | None
    itl_count: int
    itl_mean_ms: float | None
    itl_max_ms: float | None
    tpot_ms: float | None
    e2e_ms: float
    corrected_e2e_ms: float | None
    input_tokens: int | None
    output_tokens: int
    tokens_server_counted: bool
    outcome: Literal["success", "failure"]
    error_class: str | None
    http_status: int | None
    cached_tokens: int | None
    """Prompt tokens the server served from its prefix cache, as it reported them."""
    conversation: str | None = None
    """A sessions run's conversation id; null outside sessions."""
    turn: int | None = None
    """The turn's index within its conversation, from 0."""
    tool_call_ms: float | None = None
    """Time to the first tool-call delta, from t_send."""
    quality: bool | None = None
    """A quality canary's verdict (its reply met the line's `expect`); null unchecked."""
    items: int | None = None
    """Inputs embedded (openai-embeddings) or documents ranked (rerank); null otherwise."""
    audio_s: float | None = None
    """Seconds of audio a transcription sent; null otherwise."""
    streamed: bool | None = None
    """Whether a request asked to stream was answered as a stream: false when the server
    answered one JSON body instead (its TTFT is its E2E); null when not asked to stream."""
    ttfo_ms: float | None = None
    """Time to the first answer output, after a reasoning model's thinking (TTFT is the first
    output of any kind); null for kinds without an answer stream."""
    reasoning_tokens: int | None = None
    """Output tokens spent reasoning; null when the answer had none."""
    reasoning_server_counted: bool | None = None
    """Whether reasoning_tokens is the server's count (else counted from the deltas)."""
    input_chars: int | None = None
    """Characters a speech request asked to be spoken; null otherwise."""
    dns_ms: float | None = None
    """Name resolution of a request that opened its own connection; null on a reused
    connection and for an address literal (docs/metrics.md#http-phases)."""
    connect_ms: float | None = None
    """TCP connect of a request that opened its own connection; null on a reused one."""
    tls_ms: float | None = None
    """TLS handshake of a request that opened its own https connection; null otherwise."""
    ttfb_ms: float | None = None
    """From the request sent (its connection ready) to its response head received."""
    connection_reused: bool | None = None
    """Whether the request went on a connection an earlier request opened."""
    trace_id: str | None = None
    """The W3C trace id of the `traceparent` the request carried: the server's trace of it."""


class SamplePage(BaseModel):
    run_id: DbId
    run_status: RunStatus
    items: list[SampleRead]
    next_cursor: str | None
    """Pass as `cursor` for what follows; null once the run is final and nothing follows."""


class RunAccepted(BaseModel):
    """202 answer to 'run now': poll `href` for the result."""

    id: DbId
    status: RunStatus
    href: str


class ServerSeries(BaseModel):
    """One series the run read from its server's metrics, in scrape order."""

    name: str
    at: list[datetime]
    value: list[float]


class ServerTelemetry(BaseModel):
    """What the server's own metrics (its endpoint's metrics_url) said during the run: each
    series as scraped (the run's summary has their min, mean, max and last)."""

    run_id: DbId
    series: list[ServerSeries]
    next_cursor: str | None = None
    """Pass as `cursor` for the next page of series; null on the last page."""


class DeadLetterRead(BaseModel):
    """A record of the run the database refused, kept as it was (see the run's `error`)."""

    model_config = ConfigDict(from_attributes=True)

    id: DbId
    at: datetime
    kind: Literal["sample", "final"]
    pos: int | None
    """A sample's position in the run."""
    reason: str
    """non_finite, out_of_range, invalid_text, too_long, constraint or invalid_value."""
    error: str
    """What the database (or the JSON encoder) said."""
    record: str
    """The record as JSON text, non-finite numbers spelled as strings (at most 64 KiB)."""


class DeadLetters(BaseModel):
    run_id: DbId
    items: list[DeadLetterRead]
    next_cursor: str | None = None
    """Pass as `cursor` for the next page; null on the last page."""
