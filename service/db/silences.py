"""Silence rows: the mapping between the silence schemas and their columns, and the queries
of /api/v1/silences. A silence is never deleted: expiring it keeps the record."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import Silence
from sustain.service.errors import FieldError, NotFoundError
from sustain.service.evaluation.matchers import silence_state
from sustain.service.schemas.silences import MatcherBody, SilenceCreate, SilenceRead


def read(silence: Silence, now: datetime) -> SilenceRead:
    """What the API answers for a stored silence; its state as of `now`."""
    return SilenceRead(
        id=silence.id, matchers=[MatcherBody(**m) for m in silence.matchers],
        starts_at=silence.starts_at, ends_at=silence.ends_at, comment=silence.comment,
        created_by=silence.created_by, created_at=silence.created_at,
        state=silence_state(silence.starts_at, silence.ends_at, now))


def check(body: SilenceCreate, now: datetime) -> datetime:
    """When a silence made from `body` at `now` starts; FieldError unless it ends after it
    starts and after `now`."""
    starts = body.starts_at or now
    if body.ends_at <= starts:
        raise FieldError("ends_at", "must be after starts_at")
    if body.ends_at <= now:
        raise FieldError("ends_at", "must be in the future")
    return starts


async def create(session: AsyncSession, body: SilenceCreate, now: datetime, caller: str
                 ) -> Silence:
    """A new silence from `body` (starting `now` unless it says when); it must end after it
    starts and after `now` (see `check`)."""
    starts = check(body, now)
    silence = Silence(matchers=[m.model_dump() for m in body.matchers], starts_at=starts,
                      ends_at=body.ends_at, comment=body.comment,
                      created_by=body.created_by or caller)
    session.add(silence)
    await session.flush()
    await session.refresh(silence)
    return silence


async def list_all(session: AsyncSession) -> Sequence[Silence]:
    """Every silence, newest first."""
    return (await session.execute(select(Silence).order_by(Silence.id.desc()))).scalars().all()


async def page(session: AsyncSession, state: str | None, now: datetime,
               before_id: int | None, limit: int) -> Sequence[Silence]:
    """At most `limit` silences, newest first, older than `before_id` (a page's last id);
    with `state`, only those in it as of `now` (see evaluation.matchers.silence_state)."""
    query = select(Silence).order_by(Silence.id.desc()).limit(limit)
    if state == "pending":
        query = query.where(Silence.starts_at > now)
    elif state == "active":
        query = query.where(Silence.starts_at <= now, Silence.ends_at > now)
    elif state == "expired":
        query = query.where(Silence.starts_at <= now, Silence.ends_at <= now)
    if before_id is not None:
        query = query.where(Silence.id < before_id)
    return (await session.execute(query)).scalars().all()


async def get(session: AsyncSession, silence_id: int) -> Silence:
    silence = await session.get(Silence, silence_id)
    if silence is None:
        raise NotFoundError("silence", silence_id)
    return silence


def expire(silence: Silence, now: datetime) -> None:
    """End it at `now` (a pending one is cut to nothing); the record stays."""
    if silence.ends_at > now:
        if silence.starts_at >= now:
            silence.starts_at = now
        silence.ends_at = max(now, silence.starts_at + timedelta(microseconds=1))
