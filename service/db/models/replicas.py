"""The measuring processes: replicas' and agents' heartbeats, and the parts of a
run an agent is uploading."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Double,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from sustain.service.db.models.base import (
    Base,
    created_column,
    location_check,
    location_column,
)


class Replica(Base):
    """A running sustain: its heartbeat and its load (runs in flight)."""

    __tablename__ = "replicas"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(server_default=func.now())
    heartbeat_at: Mapped[datetime] = mapped_column(server_default=func.now())
    in_flight: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    stopping: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    location: Mapped[str] = location_column()
    kind: Mapped[str] = mapped_column(String(16), server_default="replica")
    """`replica` (a sustain service) or `agent` (sustain agent, beating over the API)."""
    clock_offset_ms: Mapped[float | None] = mapped_column(Double)
    """An agent's wall clock minus the service's, as the agent measured it (reported, never
    used to compute a latency)."""
    spooled_runs: Mapped[int | None] = mapped_column(Integer)
    """Finished runs an agent holds on its disk, not yet uploaded."""

    __table_args__ = (location_check(),
                      CheckConstraint("kind IN ('replica', 'agent')", name="replica_kind_known"))


class AgentUploadPart(Base):
    """One part of a run an agent is uploading (its samples, and the final record in the
    last part), kept until the last part arrives and the whole run is stored."""

    __tablename__ = "agent_upload_parts"

    upload_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    part: Mapped[int] = mapped_column(Integer, primary_key=True)
    agent: Mapped[str] = mapped_column(Text)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = created_column()

    __table_args__ = (Index("ix_agent_upload_parts_created_at", "created_at"),)
