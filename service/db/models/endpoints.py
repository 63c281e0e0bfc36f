"""What is measured: endpoints, and the probes that measure them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    Integer,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column, relationship

from sustain.service.db.models.base import (
    Base,
    NamedResource,
    created_column,
    updated_column,
)


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
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


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
    slo_ttfo_ms: Mapped[float | None] = mapped_column(Double)
    slo_e2e_ms: Mapped[float | None] = mapped_column(Double)
    labels: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    locations: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{default}")
    """Where the probe runs from: each tick runs once in each of these locations."""
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()

    __table_args__ = (
        CheckConstraint("interval_seconds > 0", name="interval_positive"),
        CheckConstraint("cardinality(locations) BETWEEN 1 AND 16", name="locations_count"),
        CheckConstraint("rag_rerank_endpoint_id IS NULL OR rag_embed_endpoint_id IS NOT NULL",
                        name="rag_rerank_needs_embed"),
    )
