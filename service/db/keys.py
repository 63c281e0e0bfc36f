"""API keys, status-page sessions and their queries. Keys are looked up by their SHA-256;
the bootstrap admin key (SUSTAIN_ADMIN_KEY) is never stored and is checked by the caller."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.access.keys import Role, generate_key, key_hash, shown_prefix
from sustain.service.db.models import ApiKey, WebSession
from sustain.service.errors import ConflictError, NotFoundError
from sustain.service.schemas.keys import KeyCreated, KeyRead

LAST_USED_RESOLUTION = timedelta(minutes=1)
"""last_used_at is written at most this often per key, so reads do not each cost a write."""


def read(key: ApiKey) -> KeyRead:
    return KeyRead(id=key.id, name=key.name, role=Role(key.role), location=key.location,
                   prefix=key.prefix,
                   created_by=key.created_by, created_at=key.created_at,
                   last_used_at=key.last_used_at, revoked_at=key.revoked_at)


async def create(session: AsyncSession, name: str, role: Role, created_by: str,
                 location: str | None = None) -> KeyCreated:
    """A new key (an agent key bound to `location`); the answer is the only place the key
    itself ever appears."""
    key = generate_key()
    row = ApiKey(name=name, role=role.value, prefix=shown_prefix(key), key_hash=key_hash(key),
                 created_by=created_by, location=location)
    session.add(row)
    try:
        await session.flush()
    except IntegrityError:
        raise ConflictError(f"an active key named {name!r} exists") from None
    await session.refresh(row)
    return KeyCreated(**read(row).model_dump(), key=key)


async def list_all(session: AsyncSession) -> Sequence[ApiKey]:
    return (await session.execute(select(ApiKey).order_by(ApiKey.id))).scalars().all()


async def page(session: AsyncSession, after_id: int | None, limit: int) -> Sequence[ApiKey]:
    """At most `limit` keys in id order, those after `after_id` (a page's last id)."""
    query = select(ApiKey).order_by(ApiKey.id).limit(limit)
    if after_id is not None:
        query = query.where(ApiKey.id > after_id)
    return (await session.execute(query)).scalars().all()


async def revoke(session: AsyncSession, key_id: int, now: datetime) -> ApiKey:
    """Revoke a key (idempotent) and end its status-page sessions; the row stays."""
    row = await session.get(ApiKey, key_id)
    if row is None:
        raise NotFoundError("key", key_id)
    if row.revoked_at is None:
        row.revoked_at = now
    await session.execute(delete(WebSession).where(WebSession.key_hash == row.key_hash))
    return row


@dataclass(frozen=True)
class StoredKey:
    id: int
    name: str
    role: Role
    last_used_at: datetime | None
    revoked: bool = False
    location: str | None = None


async def by_hash(session: AsyncSession, digest: str) -> StoredKey | None:
    """The key with this hash, revoked or not (hashes are unique), or None."""
    row = (await session.execute(
        select(ApiKey.id, ApiKey.name, ApiKey.role, ApiKey.last_used_at, ApiKey.revoked_at,
               ApiKey.location)
        .where(ApiKey.key_hash == digest))).first()
    if row is None:
        return None
    return StoredKey(id=row.id, name=row.name, role=Role(row.role),
                     last_used_at=row.last_used_at, revoked=row.revoked_at is not None,
                     location=row.location)


async def touch(session: AsyncSession, key: StoredKey, now: datetime) -> None:
    """Record a use, at most once per LAST_USED_RESOLUTION."""
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
        await session.execute(update(ApiKey).where(ApiKey.id == key.id)
                              .values(last_used_at=now))


async def open_session(session: AsyncSession, digest: str, now: datetime,
                       lifetime: timedelta) -> str:
    """A new sign-in for the key with hash `digest`; returns the cookie token (stored hashed).
    Expired sessions are swept on the way."""
    await session.execute(delete(WebSession).where(WebSession.expires_at < now))
    token = secrets.token_urlsafe(32)
    session.add(WebSession(token_hash=key_hash(token), key_hash=digest,
                           expires_at=now + lifetime))
    await session.flush()
    return token


async def session_key_hash(session: AsyncSession, token: str, now: datetime) -> str | None:
    """The key hash behind a live sign-in cookie, or None."""
    return (await session.execute(
        select(WebSession.key_hash).where(WebSession.token_hash == key_hash(token),
                                          WebSession.expires_at > now))).scalar_one_or_none()


async def close_session(session: AsyncSession, token: str) -> None:
    await session.execute(delete(WebSession).where(WebSession.token_hash == key_hash(token)))
