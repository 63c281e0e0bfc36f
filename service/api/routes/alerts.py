"""/api/v1/alerts: every alert that has left `inactive`, and the transitions it went through."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from sqlalchemy import select

from sustain.service.api.deps import SessionDep
from sustain.service.db.models import AlertEvent, AlertRow
from sustain.service.errors import NotFoundError
from sustain.service.schemas.alerts import AlertEventRead, AlertRead

router = APIRouter(prefix="/alerts", tags=["alerts"])

State = Literal["pending", "firing", "resolved"]


@router.get("")
async def list_alerts(session: SessionDep, state: State | None = None) -> list[AlertRead]:
    query = select(AlertRow).where(AlertRow.state != "inactive").order_by(AlertRow.alertname,
                                                                          AlertRow.fingerprint)
    if state is not None:
        query = query.where(AlertRow.state == state)
    rows = (await session.execute(query)).scalars().all()
    return [AlertRead.model_validate(r, from_attributes=True) for r in rows]


@router.get("/history")
async def alert_history(session: SessionDep,
                        limit: Annotated[int, Query(ge=1, le=1000)] = 100
                        ) -> list[AlertEventRead]:
    """The newest transitions first."""
    rows = (await session.execute(
        select(AlertEvent).order_by(AlertEvent.at.desc(), AlertEvent.id.desc()).limit(limit))
    ).scalars().all()
    return [AlertEventRead.model_validate(r, from_attributes=True) for r in rows]


@router.get("/{fingerprint}")
async def get_alert(fingerprint: Annotated[str, Path(pattern=r"^[0-9a-f]{1,64}$")],
                    session: SessionDep) -> AlertRead:
    """One alert (the generatorURL of its notifications)."""
    row = await session.get(AlertRow, fingerprint)
    if row is None or row.state == "inactive":
        raise NotFoundError("alert", fingerprint)
    return AlertRead.model_validate(row, from_attributes=True)
