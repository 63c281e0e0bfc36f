"""ORM models (README, Storage). The schema only changes through Alembic revisions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from sustain.service.domain.locations import DEFAULT_LOCATION

RUN_STATUSES = ("pending", "running", "succeeded", "failed", "abandoned", "invalid", "missed",
                "skipped", "cancelled")
FINAL_RUN_STATUSES = frozenset(RUN_STATUSES) - {"pending", "running"}
RUN_TRIGGERS = ("schedule", "manual", "partition")
"""`partition`: a tick measured during a database outage by a replica that was not the one
whose measurement got stored (a sample-free `skipped` record; see migration 0010)."""


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: TIMESTAMP(timezone=True), dict[str, Any]: JSONB,
    }


def _id() -> Mapped[int]:
    return mapped_column(BigInteger, Identity(), primary_key=True)


def _location(*, primary_key: bool = False) -> Mapped[str]:
    return mapped_column(Text, server_default=DEFAULT_LOCATION, primary_key=primary_key)


def _location_check() -> CheckConstraint:
    return CheckConstraint("location ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'",
                           name="location_name")


def _created() -> Mapped[datetime]:
    return mapped_column(server_default=func.now())


def _updated() -> Mapped[datetime]:
    return mapped_column(server_default=func.now(), onupdate=func.now())


class NamedResource:
    """Mixin of resources addressed by id and by a unique name (endpoints, probes)."""

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    managed_by: Mapped[str | None] = mapped_column(Text)
    """The config file that owns this object (REST writes to it answer 409); None when it
    was created over REST."""


class Endpoint(NamedResource, Base):
    __tablename__ = "endpoints"

    base_url: Mapped[str] = mapped_column(Text)
    api_kind: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(Text)
    headers: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    auth_secret_ref: Mapped[str | None] = mapped_column(Text)
    """A reference (env:NAME or file:/path); the secret itself is never stored."""
    timeout_connect_s: Mapped[float] = mapped_column(Double)
    timeout_first_token_s: Mapped[float] = mapped_column(Double)
    timeout_total_s: Mapped[float] = mapped_column(Double)
    tls_verify: Mapped[bool] = mapped_column(Boolean)
    http2: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    http_check: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """For api_kind http: method, path, expected status, body, expected body text."""
    metrics_url: Mapped[str | None] = mapped_column(Text)
    """The server's Prometheus exposition, scraped during runs; null: none."""
    metrics_interval_s: Mapped[float] = mapped_column(Double, server_default=text("1.0"))
    metrics_names: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    deployment: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """What serves the endpoint (accelerators, price, power), for efficiency figures."""
    labels: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class Probe(NamedResource, Base):
    __tablename__ = "probes"

    endpoint_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("endpoints.id", ondelete="RESTRICT"), index=True
    )
    workload: Mapped[dict[str, Any]]
    rag_embed_endpoint_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("endpoints.id", ondelete="RESTRICT"), index=True)
    """A RAG probe's embeddings endpoint (the probe's own endpoint generates)."""
    rag_rerank_endpoint_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("endpoints.id", ondelete="RESTRICT"), index=True)
    """A RAG probe's rerank endpoint, when it reranks."""
    rag_embed_endpoint: Mapped[Endpoint | None] = relationship(
        foreign_keys=[rag_embed_endpoint_id], lazy="selectin", viewonly=True)
    """Loaded with the probe, so whatever runs it (also offline) has every endpoint."""
    rag_rerank_endpoint: Mapped[Endpoint | None] = relationship(
        foreign_keys=[rag_rerank_endpoint_id], lazy="selectin", viewonly=True)
    profile: Mapped[dict[str, Any]]
    interval_seconds: Mapped[int] = mapped_column(Integer)
    """Seconds between ticks; for a cron schedule, the gap between its next two ticks when
    it was set (used to size overlap and no-data checks)."""
    cron: Mapped[str | None] = mapped_column(Text)
    """A five-field crontab expression in UTC; None: ticks every interval_seconds."""
    schedule_since: Mapped[datetime] = mapped_column(server_default=func.now())
    """When the current schedule began (created, enabled, or its timing changed): ticks
    before it are never reported missed."""
    ticks_checked_until: Mapped[datetime | None]
    """Ticks up to here have been checked for runs (the missed-tick watermark)."""
    jitter_seconds: Mapped[float] = mapped_column(Double, server_default=text("0"))
    enabled: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    slo_ttft_ms: Mapped[float | None] = mapped_column(Double)
    slo_tpot_ms: Mapped[float | None] = mapped_column(Double)
    slo_e2e_ms: Mapped[float | None] = mapped_column(Double)
    labels: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    locations: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{default}")
    """Where the probe runs from: each tick runs once in each of these locations."""
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()

    __table_args__ = (
        CheckConstraint("interval_seconds > 0", name="interval_positive"),
        CheckConstraint("cardinality(locations) BETWEEN 1 AND 16", name="locations_count"),
        CheckConstraint("rag_rerank_endpoint_id IS NULL OR rag_embed_endpoint_id IS NOT NULL",
                        name="rag_rerank_needs_embed"),
    )


class Replica(Base):
    """A running sustain: its heartbeat and its load (runs in flight)."""

    __tablename__ = "replicas"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(server_default=func.now())
    heartbeat_at: Mapped[datetime] = mapped_column(server_default=func.now())
    in_flight: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    stopping: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    location: Mapped[str] = _location()
    kind: Mapped[str] = mapped_column(String(16), server_default="replica")
    """`replica` (a sustain service) or `agent` (sustain agent, beating over the API)."""
    clock_offset_ms: Mapped[float | None] = mapped_column(Double)
    """An agent's wall clock minus the service's, as the agent measured it (reported, never
    used to compute a latency)."""
    spooled_runs: Mapped[int | None] = mapped_column(Integer)
    """Finished runs an agent holds on its disk, not yet uploaded."""

    __table_args__ = (_location_check(),
                      CheckConstraint("kind IN ('replica', 'agent')", name="replica_kind_known"))


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = _id()
    probe_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("probes.id", ondelete="CASCADE")
    )
    trigger: Mapped[str] = mapped_column(String(16))
    scheduled_for: Mapped[datetime]
    status: Mapped[str] = mapped_column(String(16), server_default=text("'pending'"))
    location: Mapped[str] = _location()
    """Where it was measured from (a scheduled tick runs once per location of its probe)."""
    claimed_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created()
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
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
        _location_check(),
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

    __table_args__ = (
        Index("ix_samples_probe_id_sent_at", "probe_id", "sent_at"),
        {"postgresql_partition_by": "RANGE (sent_at)"},
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


class RunSketch(SketchColumns, Base):
    """One metric of one stage of a run."""

    __tablename__ = "run_sketches"

    run_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    stage: Mapped[int] = mapped_column(SmallInteger, primary_key=True)


class Rollup(Base):
    """Counts of a probe's runs whose scheduled_for falls in [start, start + width_s), for
    windowed availability and throughput. Widths are an hour and a day."""

    __tablename__ = "rollups"

    probe_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("probes.id", ondelete="CASCADE"), primary_key=True)
    location: Mapped[str] = _location(primary_key=True)
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

    __table_args__ = (_location_check(),)


class RollupSketch(SketchColumns, Base):
    """The merge of every run sketch of a metric in one rollup bucket."""

    __tablename__ = "rollup_sketches"

    probe_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("probes.id", ondelete="CASCADE"), primary_key=True)
    location: Mapped[str] = _location(primary_key=True)
    width_s: Mapped[int] = mapped_column(Integer, primary_key=True)
    start: Mapped[datetime] = mapped_column(primary_key=True)

    __table_args__ = (_location_check(),)


class Slo(NamedResource, Base):
    """A service level objective over the runs of the probes it selects."""

    __tablename__ = "slos"

    description: Mapped[str | None] = mapped_column(Text)
    probe_names: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    probe_labels: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    """Probes whose labels include all of these are covered too."""
    kind: Mapped[str] = mapped_column(String(16))
    metric: Mapped[str | None] = mapped_column(String(16))
    threshold_ms: Mapped[float | None] = mapped_column(Double)
    objective: Mapped[float] = mapped_column(Double)
    window_s: Mapped[int] = mapped_column(Integer)
    tiers: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    locations_mode: Mapped[str] = mapped_column(String(8), server_default="across")
    """`across`: judged over every location's events together; `each`: in each location,
    a tier breaching when at least `min_locations` locations breach it."""
    min_locations: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()

    __table_args__ = (
        CheckConstraint("kind IN ('availability', 'latency', 'goodput', 'quality')",
                        name="kind_known"),
        CheckConstraint("objective > 0 AND objective < 1", name="objective_range"),
        CheckConstraint("locations_mode IN ('across', 'each')", name="locations_mode_known"),
        CheckConstraint("min_locations BETWEEN 1 AND 16", name="min_locations_range"),
    )


class SloRunCount(Base):
    """Good and total events of one run for one SLO that covers it."""

    __tablename__ = "slo_run_counts"

    slo_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("slos.id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True, index=True)
    scheduled_for: Mapped[datetime]
    good: Mapped[int] = mapped_column(BigInteger)
    total: Mapped[int] = mapped_column(BigInteger)
    approximate: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    """Counted from the run's sketches (its raw samples were past retention)."""
    location: Mapped[str] = mapped_column(Text, server_default=DEFAULT_LOCATION)
    """The run's location (an SLO may be judged in each)."""

    __table_args__ = (Index("ix_slo_run_counts_slo_id_scheduled_for", "slo_id",
                            "scheduled_for"),)


class AlertRow(Base):
    """One alert (by fingerprint) and where its state machine stands."""

    __tablename__ = "alerts"

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    alertname: Mapped[str] = mapped_column(String(100))
    labels: Mapped[dict[str, Any]]
    annotations: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    severity: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    active_since: Mapped[datetime | None]
    fired_at: Mapped[datetime | None]
    resolved_at: Mapped[datetime | None]
    last_notified_at: Mapped[datetime | None]
    evaluated_at: Mapped[datetime | None]

    __table_args__ = (
        CheckConstraint("state IN ('inactive', 'pending', 'firing', 'resolved')",
                        name="alert_state_known"),
        Index("ix_alerts_state", "state"),
    )


class AlertEvent(Base):
    """A transition of an alert: the alert history."""

    __tablename__ = "alert_events"

    id: Mapped[int] = _id()
    fingerprint: Mapped[str] = mapped_column(
        String(64), ForeignKey("alerts.fingerprint", ondelete="CASCADE"))
    transition: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime]
    replica: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_alert_events_fingerprint_at", "fingerprint", "at"),)


class Notification(Base):
    """A notification owed for a transition (the outbox the notifiers drain)."""

    __tablename__ = "notifications"

    id: Mapped[int] = _id()
    fingerprint: Mapped[str] = mapped_column(
        String(64), ForeignKey("alerts.fingerprint", ondelete="CASCADE"))
    transition: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = _created()
    dispatched_at: Mapped[datetime | None]
    """When it was fanned out into one delivery per matching notifier."""

    __table_args__ = (Index("ix_notifications_pending", "id",
                            postgresql_where=text("dispatched_at IS NULL")),)


NOTIFIER_KINDS = ("webhook", "slack", "alertmanager")
DELIVERY_STATES = ("pending", "delivered", "failed", "silenced", "skipped")


class Notifier(NamedResource, Base):
    """Where alert notifications go: a JSON webhook, a Slack incoming webhook or an
    Alertmanager. The URL is either plain or a secret reference (Slack URLs are secrets)."""

    __tablename__ = "notifiers"

    kind: Mapped[str] = mapped_column(String(16))
    url: Mapped[str | None] = mapped_column(Text)
    url_secret_ref: Mapped[str | None] = mapped_column(Text)
    signing_secret_ref: Mapped[str | None] = mapped_column(Text)
    """webhook: HMAC-SHA256 key reference for the signature header."""
    match: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    """Label equalities an alert must have to be sent here (empty: every alert)."""
    send_resolved: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    enabled: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    timeout_s: Mapped[float] = mapped_column(Double)
    resent_at: Mapped[datetime | None]
    """alertmanager: when firing alerts were last re-sent (one replica per period)."""
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()

    __table_args__ = (
        CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in NOTIFIER_KINDS) + ")",
                        name="notifier_kind_known"),
        CheckConstraint("(url IS NULL) <> (url_secret_ref IS NULL)", name="notifier_one_url"),
    )


class Silence(Base):
    """Suppresses delivery of alerts whose labels match every matcher, from starts_at to
    ends_at. Deleting one expires it (ends_at = now) and keeps the record."""

    __tablename__ = "silences"

    id: Mapped[int] = _id()
    matchers: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    starts_at: Mapped[datetime]
    ends_at: Mapped[datetime] = mapped_column(index=True)
    comment: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _created()

    __table_args__ = (CheckConstraint("ends_at > starts_at", name="silence_ends_after_start"),)


class Delivery(Base):
    """One notification to one notifier: its attempts, backoff, lease and outcome (the
    delivery log)."""

    __tablename__ = "deliveries"

    id: Mapped[int] = _id()
    notification_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("notifications.id", ondelete="CASCADE"), index=True)
    notifier_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("notifiers.id", ondelete="CASCADE"))
    fingerprint: Mapped[str] = mapped_column(String(64))
    transition: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), server_default=text("'pending'"))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    next_attempt_at: Mapped[datetime] = mapped_column(server_default=func.now())
    leased_until: Mapped[datetime | None]
    leased_by: Mapped[str | None] = mapped_column(Text)
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None]

    __table_args__ = (
        CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in DELIVERY_STATES) + ")",
                        name="delivery_state_known"),
        Index("ix_deliveries_pending", "next_attempt_at",
              postgresql_where=text("state = 'pending'")),
        Index("ix_deliveries_notifier_id_id", "notifier_id", "id"),
    )


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


class ApiKey(Base):
    """A named API key with a role. Only the key's SHA-256 is stored; `prefix` keeps its first
    characters to tell keys apart. Revoked keys stay for the audit trail."""

    __tablename__ = "api_keys"

    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(String(16))
    prefix: Mapped[str] = mapped_column(String(32))
    key_hash: Mapped[str] = mapped_column(String(64))
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _created()
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    location: Mapped[str | None] = mapped_column(Text)
    """The location an `agent` key measures from (and the only one it may act for)."""

    __table_args__ = (
        CheckConstraint("role IN ('viewer', 'editor', 'admin', 'agent')",
                        name="api_key_role_known"),
        CheckConstraint("(role = 'agent') = (location IS NOT NULL)",
                        name="api_key_agent_location"),
        UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
        Index("uq_api_keys_active_name", "name", unique=True,
              postgresql_where=text("revoked_at IS NULL")),
    )


class AgentUploadPart(Base):
    """One part of a run an agent is uploading (its samples, and the final record in the
    last part), kept until the last part arrives and the whole run is stored."""

    __tablename__ = "agent_upload_parts"

    upload_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    part: Mapped[int] = mapped_column(Integer, primary_key=True)
    agent: Mapped[str] = mapped_column(Text)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = _created()

    __table_args__ = (Index("ix_agent_upload_parts_created_at", "created_at"),)


class WebSession(Base):
    """A status-page sign-in: the hash of its cookie token and of the key that signed in."""

    __tablename__ = "web_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = _created()
    expires_at: Mapped[datetime] = mapped_column(index=True)


class AuditEntry(Base):
    """One write through the API: who, what, when, and the status it got."""

    __tablename__ = "audit_log"

    id: Mapped[int] = _id()
    at: Mapped[datetime] = mapped_column(server_default=func.now(), index=True)
    actor: Mapped[str] = mapped_column(Text)
    """The key's name; `SUSTAIN_ADMIN_KEY` for the bootstrap key; `anonymous` without one."""
    key_id: Mapped[int | None] = mapped_column(BigInteger)
    role: Mapped[str | None] = mapped_column(String(16))
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(Text)
    object_id: Mapped[str | None] = mapped_column(Text)
    status: Mapped[int] = mapped_column(Integer)


DEAD_LETTER_KINDS = ("sample", "final")


class DeadLetter(Base):
    """A record the database refused (a value out of range, text or JSON it cannot hold),
    kept as it was with the database's words; its run is failed with the reason. Bounded:
    the writer keeps the newest rows only."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = _id()
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
