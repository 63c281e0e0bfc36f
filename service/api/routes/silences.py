"""/api/v1/silences: suppress delivery of matching alerts for a while. Deleting a silence
expires it; expired silences stay listed (with ?state=expired) as a record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Path, status
from sqlalchemy import select

from sustain.service.api.deps import SessionDep
from sustain.service.db.models import Silence
from sustain.service.errors import FieldError, NotFoundError
from sustain.service.evaluation.matchers import silence_state
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.silences import MatcherBody, SilenceCreate, SilenceRead

router = APIRouter(prefix="/silences", tags=["silences"])

SilenceId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]
State = Literal["pending", "active", "expired"]


def silence_read(silence: Silence, now: datetime) -> SilenceRead:
    return SilenceRead(
        id=silence.id, matchers=[MatcherBody(**m) for m in silence.matchers],
        starts_at=silence.starts_at, ends_at=silence.ends_at, comment=silence.comment,
        created_by=silence.created_by, created_at=silence.created_at,
        state=silence_state(silence.starts_at, silence.ends_at, now))


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_silence(body: SilenceCreate, session: SessionDep) -> SilenceRead:
    now = datetime.now(UTC)
    starts = body.starts_at or now
    if body.ends_at <= starts:
        raise FieldError("ends_at", "must be after starts_at")
    if body.ends_at <= now:
        raise FieldError("ends_at", "must be in the future")
    silence = Silence(matchers=[m.model_dump() for m in body.matchers], starts_at=starts,
                      ends_at=body.ends_at, comment=body.comment, created_by=body.created_by)
    session.add(silence)
    await session.flush()
    await session.refresh(silence)
    await session.commit()
    return silence_read(silence, now)


@router.get("")
async def list_silences(session: SessionDep, state: State | None = None) -> list[SilenceRead]:
    now = datetime.now(UTC)
    rows = (await session.execute(select(Silence).order_by(Silence.id.desc()))).scalars()
    found = [silence_read(s, now) for s in rows]
    return [s for s in found if state is None or s.state == state]


@router.get("/{silence_id}")
async def get_silence(silence_id: SilenceId, session: SessionDep) -> SilenceRead:
    silence = await session.get(Silence, silence_id)
    if silence is None:
        raise NotFoundError("silence", silence_id)
    return silence_read(silence, datetime.now(UTC))


@router.delete("/{silence_id}", status_code=status.HTTP_204_NO_CONTENT)
async def expire_silence(silence_id: SilenceId, session: SessionDep) -> None:
    """Expire it now (a pending one is cut to nothing); the record stays."""
    silence = await session.get(Silence, silence_id)
    if silence is None:
        raise NotFoundError("silence", silence_id)
    now = datetime.now(UTC)
    if silence.ends_at > now:
        if silence.starts_at >= now:
            silence.starts_at = now
        silence.ends_at = max(now, silence.starts_at + timedelta(microseconds=1))
        await session.commit()
