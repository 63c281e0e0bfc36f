"""/api/v1/silences: suppress delivery of matching alerts for a while. Deleting a silence
expires it; expired silences stay listed (with ?state=expired) as a record."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, status

from sustain.service.api import cursor as cursors
from sustain.service.api.auth import PrincipalDep
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.paging import PageDep
from sustain.service.db import quotas
from sustain.service.db import silences as silence_queries
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.paging import Page
from sustain.service.schemas.silences import SilenceCreate, SilenceRead

router = APIRouter(prefix="/silences", tags=["silences"])
CURSOR_KIND = "silences"

SilenceId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]
State = Literal["pending", "active", "expired"]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_silence(body: SilenceCreate, session: SessionDep, state: StateDep,
                         caller: PrincipalDep) -> SilenceRead:
    """A new silence; 409 naming SUSTAIN_MAX_SILENCES when that many are pending or active
    (each delivery pass matches every alert it sends against the active ones)."""
    now = datetime.now(UTC)
    silence_queries.check(body, now)
    await quotas.make_room_for_silence(session, now, state.settings.max_silences)
    silence = await silence_queries.create(session, body, now, caller.name)
    await session.commit()
    return silence_queries.read(silence, now)


@router.get("")
async def list_silences(session: SessionDep, paging: PageDep,
                        state: State | None = None) -> Page[SilenceRead]:
    """Silences, newest first, a page at a time; with `state`, those in it now."""
    now = datetime.now(UTC)
    rows = await silence_queries.page(session, state, now,
                                      cursors.decode(CURSOR_KIND, paging.cursor), paging.fetch)
    page, following = paging.cut(rows, lambda s: cursors.encode(CURSOR_KIND, s.id))
    return Page(items=[silence_queries.read(s, now) for s in page], next_cursor=following)


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
