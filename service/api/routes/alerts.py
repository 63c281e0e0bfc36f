"""/api/v1/alerts: every alert that has left `inactive`, and the transitions it went through."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Path
from sqlalchemy import select, tuple_

from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep
from sustain.service.api.paging import PageDep
from sustain.service.db.models import AlertEvent, AlertRow
from sustain.service.errors import NotFoundError
from sustain.service.schemas.alerts import AlertEventRead, AlertRead
from sustain.service.schemas.paging import Page

router = APIRouter(prefix="/alerts", tags=["alerts"])

State = Literal["pending", "firing", "resolved"]
ALERTS_CURSOR = "alerts"
HISTORY_CURSOR = "alert-events"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(at: datetime) -> int:
    """A timestamp as whole microseconds since the epoch (exact, as PostgreSQL keeps it)."""
    return (at - EPOCH) // timedelta(microseconds=1)


@router.get("")
async def list_alerts(session: SessionDep, paging: PageDep,
                      state: State | None = None) -> Page[AlertRead]:
    """Alerts by alertname then fingerprint, a page at a time."""
    query = select(AlertRow).where(AlertRow.state != "inactive").order_by(
        AlertRow.alertname, AlertRow.fingerprint).limit(paging.fetch)
    if state is not None:
        query = query.where(AlertRow.state == state)
    after = cursors.decode_key(ALERTS_CURSOR, paging.cursor, (str, str))
    if after is not None:
        query = query.where(tuple_(AlertRow.alertname, AlertRow.fingerprint) > tuple(after))
    rows = (await session.execute(query)).scalars().all()
    page, following = paging.cut(rows, lambda r: cursors.encode_key(
        ALERTS_CURSOR, (r.alertname, r.fingerprint)))
    return Page(items=[AlertRead.model_validate(r, from_attributes=True) for r in page],
                next_cursor=following)


@router.get("/history")
async def alert_history(session: SessionDep, paging: PageDep) -> Page[AlertEventRead]:
    """The newest transitions first, a page at a time."""
    query = select(AlertEvent).order_by(AlertEvent.at.desc(), AlertEvent.id.desc()
                                        ).limit(paging.fetch)
    before = cursors.decode_key(HISTORY_CURSOR, paging.cursor, (int, int))
    if before is not None:
        at_us, event_id = before
        assert isinstance(at_us, int)
        query = query.where(tuple_(AlertEvent.at, AlertEvent.id) < (
            EPOCH + timedelta(microseconds=at_us), event_id))
    rows = (await session.execute(query)).scalars().all()
    page, following = paging.cut(rows, lambda e: cursors.encode_key(
        HISTORY_CURSOR, (_micros(e.at), e.id)))
    return Page(items=[AlertEventRead.model_validate(r, from_attributes=True) for r in page],
                next_cursor=following)


@router.get("/{fingerprint}")
async def get_alert(fingerprint: Annotated[str, Path(pattern=r"^[0-9a-f]{1,64}$")],
                    session: SessionDep) -> AlertRead:
    """One alert (the generatorURL of its notifications)."""
    row = await session.get(AlertRow, fingerprint)
    if row is None or row.state == "inactive":
        raise NotFoundError("alert", fingerprint)
    return AlertRead.model_validate(row, from_attributes=True)
