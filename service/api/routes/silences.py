"""/api/v1/silences: suppress delivery of matching alerts for a while. Deleting a silence
expires it; expired silences stay listed (with ?state=expired) as a record."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, status

from sustain.service.api.auth import PrincipalDep
from sustain.service.api.deps import SessionDep
from sustain.service.db import silences as silence_queries
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.silences import SilenceCreate, SilenceRead

router = APIRouter(prefix="/silences", tags=["silences"])

SilenceId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]
State = Literal["pending", "active", "expired"]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_silence(body: SilenceCreate, session: SessionDep,
                         caller: PrincipalDep) -> SilenceRead:
    now = datetime.now(UTC)
    silence = await silence_queries.create(session, body, now, caller.name)
    await session.commit()
    return silence_queries.read(silence, now)


@router.get("")
async def list_silences(session: SessionDep, state: State | None = None) -> list[SilenceRead]:
    now = datetime.now(UTC)
    found = [silence_queries.read(s, now) for s in await silence_queries.list_all(session)]
    return [s for s in found if state is None or s.state == state]


@router.get("/{silence_id}")
async def get_silence(silence_id: SilenceId, session: SessionDep) -> SilenceRead:
    return silence_queries.read(await silence_queries.get(session, silence_id),
                                datetime.now(UTC))


@router.delete("/{silence_id}", status_code=status.HTTP_204_NO_CONTENT)
async def expire_silence(silence_id: SilenceId, session: SessionDep) -> None:
    """Expire it now (a pending one is cut to nothing); the record stays."""
    silence = await silence_queries.get(session, silence_id)
    silence_queries.expire(silence, datetime.now(UTC))
    await session.commit()
