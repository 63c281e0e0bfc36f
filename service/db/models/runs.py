"""Runs and what they measured: raw samples (partitioned by day), server series, the run's
sketches (one record on its row), their hourly and daily rollups, drift verdicts, and the
records the database refused (dead letters)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP, UUID
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import Mapped, mapped_column

from sustain.service.db.models.base import (
    Base,
    created_column,
    id_column,
    location_check,
    location_column,
)
from sustain.service.runs import summary_record as summaries

RUN_STATUSES = ("pending", "running", "succeeded", "failed", "abandoned", "invalid", "missed",
                "skipped", "cancelled", "interrupted")
FINAL_RUN_STATUSES = frozenset(RUN_STATUSES) - {"pending", "running"}
RUN_TRIGGERS = ("schedule", "manual", "partition")
"""`partition`: a tick measured during a database outage by a replica that was not the one
whose measurement got stored (a sample-free `skipped` record; see migration 0010)."""


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = id_column()
    probe_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("probes.id", ondelete="CASCADE")
    )
    trigger: Mapped[str] = mapped_column(String(16))
    scheduled_for: Mapped[datetime]
    status: Mapped[str] = mapped_column(String(16), server_default=text("'pending'"))
    location: Mapped[str] = location_column()
    """Where it was measured from (a scheduled tick runs once per location of its probe)."""
    claimed_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    summary_json: Mapped[dict[str, Any] | None] = mapped_column("summary", JSONB)
    """The figures SQL reads (runs.summary_record.SQL_KEYS, those with a value); for a run
    stored before the record, its whole summary. SQL expressions on `Run.summary` mean
    this column."""
    summary_record: Mapped[bytes | None] = mapped_column(LargeBinary)
    """The whole summary, compressed (runs.summary_record): about 260 B for a
    single-request run, where its JSONB took 1.7 KiB."""
    attempts: Mapped[int | None] = mapped_column(Integer)
    successes: Mapped[int | None] = mapped_column(Integer)
    good: Mapped[int | None] = mapped_column(Integer)
    """Successes that met every SLO threshold of the probe; None when it had none."""
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    measured_s: Mapped[float | None] = mapped_column(Double)
    """Measured time (warmups left out), the denominator of throughputs."""
    quality_checked: Mapped[int | None] = mapped_column(Integer)
    """Quality canaries checked (successful requests with an `expect`); null: none."""
    quality_passed: Mapped[int | None] = mapped_column(Integer)
    capacity: Mapped[int | None] = mapped_column(Integer)
    """A capacity search's highest level that met its SLO (users or requests/s)."""
    capacity_tps: Mapped[float | None] = mapped_column(Double)
    """Output tokens per second at that level."""
    samples_dropped: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    """Raw samples lost because the write buffer was full; its summary still counts them."""
    cancel_requested_at: Mapped[datetime | None]
    """When a cancel of the running run was asked for; the replica executing it watches for
    this, stops the run and records it as `cancelled`."""
    upload_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    """The agent upload that stored the run (a re-sent upload finds it, and stores nothing)."""
    sketches: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    """Every (stage, metric) sketch of the run, one compact record
    (sustain.probes.measure.sketch_record); null for a run that measured nothing. Deferred:
    read only by the queries that merge sketches."""

    @hybrid_property
    def summary(self) -> dict[str, Any] | None:
        """The run's whole summary (its record, or the JSONB of a run stored before it)."""
        return summaries.whole(self.summary_json, self.summary_record)

    @summary.inplace.expression
    @classmethod
    def _summary_expression(cls) -> Any:
        return cls.summary_json

    __table_args__ = (
        CheckConstraint(
            "status IN (" + ", ".join(f"'{s}'" for s in RUN_STATUSES) + ")", name="status_known"
        ),
        CheckConstraint(
            "trigger IN (" + ", ".join(f"'{s}'" for s in RUN_TRIGGERS) + ")", name="trigger_known"
        ),
        Index("ix_runs_probe_id_id", "probe_id", text("id DESC")),
        Index("ix_runs_status_id", "status", text("id DESC")),
        Index("ix_runs_probe_id_scheduled_for", "probe_id", "scheduled_for"),
        Index("ix_runs_scheduled_for", "scheduled_for"),
        Index("uq_runs_upload_id", "upload_id", unique=True,
              postgresql_where=text("upload_id IS NOT NULL")),
        location_check(),
        Index(
            "uq_runs_scheduled_tick",
            "probe_id",
            "location",
            "scheduled_for",
            unique=True,
            postgresql_where=text("trigger = 'schedule'"),
        ),
    )


class SampleRow(Base):
    """One request of a run (figures: docs/metrics.md#ttft, docs/metrics.md#corrected-latency);
    times in ms from t_send unless named otherwise.

    Range-partitioned by sent_at, one partition per UTC day (service/db/partitions.py). `pos`
    is the sample's place in the order the service buffered the run's samples: the write is
    idempotent on (run_id, pos) and per-run cursors follow it."""

    __tablename__ = "samples"

    run_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    pos: Mapped[int] = mapped_column(Integer, primary_key=True)
    probe_id: Mapped[int] = mapped_column(BigInteger)
    seq: Mapped[int] = mapped_column(Integer)
    stage: Mapped[int] = mapped_column(SmallInteger)
    sent_at: Mapped[datetime] = mapped_column(primary_key=True)
    t_sched_ms: Mapped[float | None] = mapped_column(Double)
    t_send_ms: Mapped[float] = mapped_column(Double)
    lag_ms: Mapped[float | None] = mapped_column(Double)
    ttft_ms: Mapped[float | None] = mapped_column(Double)
    itl_count: Mapped[int] = mapped_column(Integer)
    itl_mean_ms: Mapped[float | None] = mapped_column(Double)
    itl_max_ms: Mapped[float | None] = mapped_column(Double)
    tpot_ms: Mapped[float | None] = mapped_column(Double)
    e2e_ms: Mapped[float] = mapped_column(Double)
    corrected_e2e_ms: Mapped[float | None] = mapped_column(Double)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    tokens_server_counted: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(String(16))
    error_class: Mapped[str | None] = mapped_column(String(32))
    http_status: Mapped[int | None] = mapped_column(SmallInteger)
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    """Prompt tokens the server served from its prefix cache (its usage report)."""
    conversation: Mapped[str | None] = mapped_column(String(256))
    """A sessions run's conversation id; null outside sessions."""
    turn: Mapped[int | None] = mapped_column(Integer)
    """The turn's index within its conversation, from 0."""
    tool_call_ms: Mapped[float | None] = mapped_column(Double)
    """Time to the first tool-call delta, from t_send (replies that were kept)."""
    quality: Mapped[bool | None] = mapped_column(Boolean)
    """A quality canary's verdict: whether the reply met its `expect`; null unchecked."""
    items: Mapped[int | None] = mapped_column(Integer)
    """Inputs embedded or documents ranked (openai-embeddings, rerank); null otherwise."""
    audio_s: Mapped[float | None] = mapped_column(Double)
    """Seconds of audio a transcription sent; null otherwise."""
    streamed: Mapped[bool | None] = mapped_column(Boolean)
    """Whether a request asked to stream was answered as a stream: false when the server
    answered one JSON body (its TTFT is its E2E); null for a request not asked to stream
    (and for samples stored before migration 0021)."""
    ttfo_ms: Mapped[float | None] = mapped_column(Double)
    """Time to the first answer output (after a reasoning model's thinking), from t_send."""
    reasoning_tokens: Mapped[int | None] = mapped_column(Integer)
    """Output tokens spent reasoning; null when the answer had none (or said nothing)."""
    reasoning_server_counted: Mapped[bool | None] = mapped_column(Boolean)
    """Whether reasoning_tokens is the server's count (else counted from the deltas)."""
    input_chars: Mapped[int | None] = mapped_column(Integer)
    """Characters of text a speech request asked to be spoken; null otherwise."""
    dns_ms: Mapped[float | None] = mapped_column(Double)
    """HTTP phases (docs/metrics.md#http-phases): name resolution, TCP connect and TLS
    handshake of a request that opened its own connection (null on a reused one, dns_ms also
    for an address literal), and TTFB, from the request sent to its response head."""
    connect_ms: Mapped[float | None] = mapped_column(Double)
    tls_ms: Mapped[float | None] = mapped_column(Double)
    ttfb_ms: Mapped[float | None] = mapped_column(Double)
    connection_reused: Mapped[bool | None] = mapped_column(Boolean)
    """Whether the request went on a connection an earlier one opened; null when it had
    none (and for samples stored before migration 0025)."""
    trace_id: Mapped[str | None] = mapped_column(String(32))
    """The W3C trace id of the traceparent the request carried (32 hex digits)."""
    error_detail: Mapped[str | None] = mapped_column(Text)
    """A failed request's error detail: the server's words (its error body's message,
    credentials redacted) or what the client saw; null for a success. Stored, not exported
    (service.runs.rows.STORED_COLUMNS)."""

    __table_args__ = (
        Index("ix_samples_probe_id_sent_at", "probe_id", "sent_at"),
        {"postgresql_partition_by": "RANGE (sent_at)"},
    )


class SampleBlock(Base):
    """A run's raw samples packed (service/runs/sample_block.py): up to 4,096 of its samples
    in `pos` order, each column stored after the other and compressed, about 43 B a sample
    where a `samples` row takes over 300. The storage job packs a finished run's rows into
    blocks (service/db/sample_packing.py); readers merge both by `pos`.

    Range-partitioned by sent_from, the same UTC days as `samples`, and dropped whole with
    them. A block spans at most an hour of send times, so a reader of a time range looks at
    the blocks that started up to an hour before it."""

    __tablename__ = "sample_blocks"

    run_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    first_pos: Mapped[int] = mapped_column(Integer, primary_key=True)
    sent_from: Mapped[datetime] = mapped_column(primary_key=True)
    """The earliest send time in the block."""
    last_pos: Mapped[int] = mapped_column(Integer)
    sent_to: Mapped[datetime] = mapped_column()
    """The latest send time in the block."""
    probe_id: Mapped[int] = mapped_column(BigInteger)
    samples: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)

    __table_args__ = (
        Index("ix_sample_blocks_probe_id_sent_from", "probe_id", "sent_from"),
        {"postgresql_partition_by": "RANGE (sent_from)"},
    )


class RunServerSeries(Base):
    """One series of a run's server telemetry (its endpoint's metrics_url, scraped during the
    run): the scrape times and values, in order."""

    __tablename__ = "run_server_series"

    run_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    at: Mapped[list[datetime]] = mapped_column(ARRAY(TIMESTAMP(timezone=True)))
    value: Mapped[list[float]] = mapped_column(ARRAY(Double))


class SketchColumns:
    """A serialised MetricSketch (probes/measure/sketch.py) with its exact count, sum, min and
    max, in the metric's unit (ms)."""

    metric: Mapped[str] = mapped_column(String(16), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger)
    sum: Mapped[float] = mapped_column(Double)
    min: Mapped[float] = mapped_column(Double)
    max: Mapped[float] = mapped_column(Double)
    sketch: Mapped[bytes] = mapped_column(LargeBinary)


class Rollup(Base):
    """Counts of a probe's runs whose scheduled_for falls in [start, start + width_s), for
    windowed availability and throughput. Widths are an hour and a day."""

    __tablename__ = "rollups"

    probe_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("probes.id", ondelete="CASCADE"), primary_key=True)
    location: Mapped[str] = location_column(primary_key=True)
    width_s: Mapped[int] = mapped_column(Integer, primary_key=True)
    start: Mapped[datetime] = mapped_column(primary_key=True)
    runs: Mapped[int] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(BigInteger)
    successes: Mapped[int] = mapped_column(BigInteger)
    good: Mapped[int] = mapped_column(BigInteger)
    good_measured_s: Mapped[float] = mapped_column(Double)
    """Measured time of the runs that counted `good` (those of probes with SLO thresholds)."""
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    measured_s: Mapped[float] = mapped_column(Double)

    __table_args__ = (location_check(),)


class RollupSketch(SketchColumns, Base):
    """The merge of every run sketch of a metric in one rollup bucket."""

    __tablename__ = "rollup_sketches"

    probe_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("probes.id", ondelete="CASCADE"), primary_key=True)
    location: Mapped[str] = location_column(primary_key=True)
    width_s: Mapped[int] = mapped_column(Integer, primary_key=True)
    start: Mapped[datetime] = mapped_column(primary_key=True)

    __table_args__ = (location_check(),)


class DriftFinding(Base):
    """The latest drift verdict of one probe, metric and statistic."""

    __tablename__ = "drift_findings"

    probe_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("probes.id", ondelete="CASCADE"), primary_key=True)
    metric: Mapped[str] = mapped_column(String(16), primary_key=True)
    stat: Mapped[str] = mapped_column(String(16), primary_key=True)
    verdict: Mapped[str] = mapped_column(String(32))
    ratio: Mapped[float | None] = mapped_column(Double)
    ci_low: Mapped[float | None] = mapped_column(Double)
    ci_high: Mapped[float | None] = mapped_column(Double)
    change_at: Mapped[datetime | None]
    evaluated_at: Mapped[datetime]


DEAD_LETTER_KINDS = ("sample", "final")


class DeadLetter(Base):
    """A record the database refused (a value out of range, text or JSON it cannot hold),
    kept as it was with the database's words; its run is failed with the reason. Bounded:
    the writer keeps the newest rows only."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = id_column()
    at: Mapped[datetime] = mapped_column(server_default=func.now())
    kind: Mapped[str] = mapped_column(String(16))
    """`sample` or `final`."""
    run_id: Mapped[int] = mapped_column(BigInteger)
    """No foreign key: the evidence outlives a deleted run."""
    probe_id: Mapped[int] = mapped_column(BigInteger)
    pos: Mapped[int | None] = mapped_column(Integer)
    """A sample's position in its run."""
    reason: Mapped[str] = mapped_column(String(32))
    """non_finite, out_of_range, invalid_text, too_long, constraint or invalid_value."""
    error: Mapped[str] = mapped_column(Text)
    """What the database (or the JSON encoder) said, bounded."""
    record: Mapped[str] = mapped_column(Text)
    """The record as JSON text (non-finite numbers spelled as strings), bounded."""

    __table_args__ = (
        CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in DEAD_LETTER_KINDS) + ")",
                        name="dead_letter_kind_known"),
        Index("uq_dead_letters_record", "run_id", "kind", text("coalesce(pos, -1)"),
              unique=True),
    )
