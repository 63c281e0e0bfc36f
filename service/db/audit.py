"""The audit log: one row per write through the API, newest first with id cursors."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.access.keys import Role
from sustain.service.db.models import AuditEntry
from sustain.service.schemas.keys import AuditRead


async def record(session: AsyncSession, *, actor: str, key_id: int | None, role: str | None,
                 method: str, path: str, object_id: str | None, status: int) -> None:
    session.add(AuditEntry(actor=actor, key_id=key_id, role=role, method=method, path=path,
                           object_id=object_id, status=status))
    await session.flush()


async def page(session: AsyncSession, before_id: int | None, limit: int
               ) -> Sequence[AuditEntry]:
    """Up to `limit` entries older than `before_id` (all when None), newest first."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(AuditEntry.id < before_id)
    return (await session.execute(query)).scalars().all()


def read(entry: AuditEntry) -> AuditRead:
    return AuditRead(id=entry.id, at=entry.at, actor=entry.actor, key_id=entry.key_id,
                     role=Role(entry.role) if entry.role else None, method=entry.method,
                     path=entry.path, object_id=entry.object_id, status=entry.status)
