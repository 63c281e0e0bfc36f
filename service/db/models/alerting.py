"""SLOs and their per-run counts, alerts and their history, and the notification
outbox: notifiers, silences and deliveries."""

from __future__ import annotations

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
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from sustain.service.db.models.base import (
    Base,
    NamedResource,
    created_column,
    id_column,
    updated_column,
)
from sustain.service.ticks.locations import DEFAULT_LOCATION


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
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()

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

    id: Mapped[int] = id_column()
    fingerprint: Mapped[str] = mapped_column(
        String(64), ForeignKey("alerts.fingerprint", ondelete="CASCADE"))
    transition: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime]
    replica: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_alert_events_fingerprint_at", "fingerprint", "at"),)


class Notification(Base):
    """A notification owed for a transition (the outbox the notifiers drain)."""

    __tablename__ = "notifications"

    id: Mapped[int] = id_column()
    fingerprint: Mapped[str] = mapped_column(
        String(64), ForeignKey("alerts.fingerprint", ondelete="CASCADE"))
    transition: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = created_column()
    dispatched_at: Mapped[datetime | None]
    """When it was fanned out into one delivery per matching notifier."""

    __table_args__ = (Index("ix_notifications_pending", "id",
                            postgresql_where=text("dispatched_at IS NULL")),)


DELIVERY_STATES = ("pending", "delivered", "failed", "silenced", "skipped")


class Notifier(NamedResource, Base):
    """Where alert notifications go. `kind` is any kind the registry knows
    (sustain.service.alerting.notifiers: no constraint here, so a new kind needs no
    migration). The URL is either plain or a secret reference (Slack URLs are secrets)."""

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
    """Kinds that re-send (Alertmanager): when firing alerts were last re-sent (one replica
    per period)."""
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()

    __table_args__ = (
        CheckConstraint("(url IS NULL) <> (url_secret_ref IS NULL)", name="notifier_one_url"),
    )


class Silence(Base):
    """Suppresses delivery of alerts whose labels match every matcher, from starts_at to
    ends_at. Deleting one expires it (ends_at = now) and keeps the record."""

    __tablename__ = "silences"

    id: Mapped[int] = id_column()
    matchers: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    starts_at: Mapped[datetime]
    ends_at: Mapped[datetime] = mapped_column(index=True)
    comment: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()

    __table_args__ = (CheckConstraint("ends_at > starts_at", name="silence_ends_after_start"),)


class Delivery(Base):
    """One notification to one notifier: its attempts, backoff, lease and outcome (the
    delivery log)."""

    __tablename__ = "deliveries"

    id: Mapped[int] = id_column()
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
    created_at: Mapped[datetime] = created_column()
    finished_at: Mapped[datetime | None]

    __table_args__ = (
        CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in DELIVERY_STATES) + ")",
                        name="delivery_state_known"),
        Index("ix_deliveries_pending", "next_attempt_at",
              postgresql_where=text("state = 'pending'")),
        Index("ix_deliveries_notifier_id_id", "notifier_id", "id"),
    )
