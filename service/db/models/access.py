"""Who may do what: API keys, status-page sessions and the audit log of writes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from sustain.service.db.models.base import Base, created_column, id_column


class ApiKey(Base):
    """A named API key with a role. Only the key's SHA-256 is stored; `prefix` keeps its first
    characters to tell keys apart. Revoked keys stay for the audit trail."""

    __tablename__ = "api_keys"

    id: Mapped[int] = id_column()
    name: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(String(16))
    prefix: Mapped[str] = mapped_column(String(32))
    key_hash: Mapped[str] = mapped_column(String(64))
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()
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


class WebSession(Base):
    """A status-page sign-in: the hash of its cookie token and of the key that signed in."""

    __tablename__ = "web_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = created_column()
    expires_at: Mapped[datetime] = mapped_column(index=True)


class AuditEntry(Base):
    """One write through the API: who, what, when, and the status it got."""

    __tablename__ = "audit_log"

    id: Mapped[int] = id_column()
    at: Mapped[datetime] = mapped_column(server_default=func.now(), index=True)
    actor: Mapped[str] = mapped_column(Text)
    """The key's name; `SUSTAIN_ADMIN_KEY` for the bootstrap key; `anonymous` without one."""
    key_id: Mapped[int | None] = mapped_column(BigInteger)
    role: Mapped[str | None] = mapped_column(String(16))
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(Text)
    object_id: Mapped[str | None] = mapped_column(Text)
    status: Mapped[int] = mapped_column(Integer)
